"""Finding the avfs binary.

The package never downloads anything at run time: a binary is either
shipped inside a platform wheel, put in the cache by an installer, or
provided by the user. The order goes from the most explicit choice to the
least:

1. ``$AGENTVFS_BIN``: the user said exactly which binary. When it is set but
   unusable, that is an error, never a silent fall-through to another avfs.
2. ``agentvfs/_bin/avfs``: the binary inside a platform wheel, built for this
   very package version.
3. ``$XDG_CACHE_HOME/agentvfs/<version>/avfs`` (default ``~/.cache``): a
   binary an installer placed for this package version.
4. ``avfs`` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List, Optional, Union

from ._version import __version__
from .errors import Attempt, BinaryNotFound

ENV_VAR = "AGENTVFS_BIN"
EXE_NAME = "avfs.exe" if os.name == "nt" else "avfs"

StrPath = Union[str, "os.PathLike[str]"]


def package_binary() -> Path:
    """Where a platform wheel keeps its binary."""
    return Path(__file__).resolve().parent / "_bin" / EXE_NAME


def cache_binary() -> Path:
    """Where an installer may cache a binary for this package version.

    XDG_CACHE_HOME is honoured only when absolute, as the XDG spec says.
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "agentvfs" / __version__ / EXE_NAME


def _unusable(path: Path) -> Optional[str]:
    """Why path cannot be run, or None when it can."""
    if not path.exists():
        return "does not exist"
    if path.is_dir():
        return "is a directory"
    if not os.access(path, os.X_OK):
        return "is not executable"
    return None


def _explicit(source: str, value: StrPath) -> str:
    """Resolve a binary the user named: a path, or a bare name looked up on PATH."""
    text = os.fspath(value)
    if os.sep not in text and (os.altsep is None or os.altsep not in text):
        found = shutil.which(text)
        if found:
            return found
        raise BinaryNotFound([Attempt(source, text, "not found on PATH")])
    reason = _unusable(Path(text))
    if reason:
        raise BinaryNotFound([Attempt(source, text, reason)])
    return text


def resolve_binary(explicit: Optional[StrPath] = None) -> str:
    """Return the path of the avfs binary to run.

    ``explicit`` (the ``bin`` option of :class:`agentvfs.Avfs`) overrides the
    search. Raises :class:`BinaryNotFound` listing what was tried.
    """
    if explicit is not None:
        return _explicit("bin argument", explicit)
    env = os.environ.get(ENV_VAR)
    if env:
        return _explicit(f"${ENV_VAR}", env)
    tried: List[Attempt] = [Attempt(f"${ENV_VAR}", "", "not set")]
    for source, path in (("package data", package_binary()), ("cache", cache_binary())):
        reason = _unusable(path)
        if reason is None:
            return str(path)
        tried.append(Attempt(source, str(path), reason))
    found = shutil.which("avfs")
    if found:
        return found
    tried.append(Attempt("PATH", os.environ.get("PATH", ""), "no avfs on PATH"))
    raise BinaryNotFound(tried)
