"""``agentvfs`` and ``python -m agentvfs``: run the avfs binary.

The wrapper adds nothing to avfs's behaviour: argv, stdin, stdout, stderr
and the exit code are avfs's own. On POSIX the process is replaced by avfs
(exec), so signals and the terminal reach it directly and no Python stays
in between; elsewhere avfs runs as a child and its exit code is passed on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import List, Optional

from ._resolve import resolve_binary
from .errors import BinaryNotFound


def _wants_json(args: List[str]) -> bool:
    """Whether --json is among avfs's own flags (not a proxied command's)."""
    own = args[: args.index("--")] if "--" in args else args
    return "--json" in own


def main(argv: Optional[List[str]] = None) -> int:
    """Run avfs with ``argv`` (default: this process's arguments).

    With the default argv on POSIX this does not return: the process
    becomes avfs. When no binary is found it reports what was tried, as an
    error document too when --json was asked for, and returns 1.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        binary = resolve_binary()
    except BinaryNotFound as exc:
        if _wants_json(args):
            print(json.dumps(exc.document, indent=2))
        print(f"agentvfs: {exc}", file=sys.stderr)
        return 1
    if argv is None and os.name == "posix":
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(binary, [binary] + args)
    return subprocess.call([binary] + args)


if __name__ == "__main__":
    sys.exit(main())
