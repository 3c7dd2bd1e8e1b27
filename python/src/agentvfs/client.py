"""The typed client: ``Avfs`` runs ``avfs ... --json`` and parses the answer.

Why a subprocess and not a library: the JSON contract of the command line
is what avfs versions, documents and tests (docs/json-contract.md), so a
client built on it works with any avfs that speaks contract version 1. Each
call runs the binary directly (argv, never a shell), reads exactly one JSON
document from stdout and turns it into a dataclass, or raises
:class:`AvfsError` for an error document.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

from ._args import Duration, Flag, command_args, go_duration
from ._commands import Commands
from ._resolve import StrPath, resolve_binary
from .errors import AvfsError, ProtocolError
from .models import (
    ApplyResult,
    ApprovalResult,
    CatResult,
    Checkpoint,
    CheckpointDeleted,
    CheckpointList,
    ContentDiff,
    Diff,
    Document,
    Fork,
    Listing,
    MkdirResult,
    Mount,
    Mounts,
    PolicyCheck,
    ProxyExecResult,
    ProxyHistory,
    Restored,
    VaultMerge,
    RmResult,
    SavedCheckpoint,
    Stat,
    StreamOutput,
    Unmounted,
    UndoResult,
    Vault,
    VaultDeleted,
    VaultList,
    VersionInfo,
    WriteResult,
)

D = TypeVar("D", bound=Document)
ENVELOPE_KIND = "proxy_exec_result"


def _opt(value: Optional[str], flag: str) -> List[str]:
    return [] if value is None else [flag, value]


def _at(ref: Optional[str]) -> List[str]:
    return _opt(ref, "--at")


class Avfs:
    """A handle on one avfs home, driven through ``avfs ... --json``.

    ``home`` is the avfs home (default: ``$AVFS_HOME``, else ``~/.avfs``),
    ``bin`` the binary to run (default: see :func:`agentvfs.resolve_binary`),
    ``vault`` the vault that commands working on "the selected vault" use
    when a call does not name one, and ``env`` extra environment variables
    for the avfs processes.
    """

    def __init__(
        self,
        home: Optional[StrPath] = None,
        bin: Optional[StrPath] = None,
        vault: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.bin: str = resolve_binary(bin)
        self.home: Optional[str] = os.fspath(home) if home is not None else None
        self.vault = vault
        self.env: Dict[str, str] = dict(env or {})
        #: Every avfs command as a typed method, generated from the command
        #: manifest (docs/commands.json): ``avfs.commands.tree("/", level=2)``.
        self.commands = Commands(self._invoke)

    def __repr__(self) -> str:
        return f"Avfs(home={self.home!r}, bin={self.bin!r}, vault={self.vault!r})"

    # --- plumbing ----------------------------------------------------------

    def argv(self, args: Sequence[str], vault: Optional[str] = None) -> List[str]:
        """The full command line for ``avfs ARGS``: global flags first, so
        they never land after a ``--``."""
        out = [self.bin, "--json"]
        if self.home is not None:
            out += ["--home", self.home]
        if vault:
            out += ["--vault", vault]
        return out + [str(a) for a in args]

    def run_json(
        self,
        args: Sequence[str],
        *,
        vault: Optional[str] = None,
        input: Optional[bytes] = None,
        envelope: bool = False,
    ) -> Dict[str, Any]:
        """Run ``avfs ARGS --json`` and return its document as a dict.

        The escape hatch for commands without a typed method (tree, quota,
        cp, mv, ...). Raises :class:`AvfsError` for an error document. With
        ``envelope``, a proxy envelope is returned whatever the exit code:
        proxy exec exits with the command's own code but still reports.
        """
        argv = self.argv(args, vault)
        env = {**os.environ, **self.env} if self.env else None
        proc = subprocess.run(
            argv,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
        )
        stdout = proc.stdout.decode("utf-8", errors="replace")
        stderr = proc.stderr.decode("utf-8", errors="replace")
        try:
            doc = json.loads(stdout)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise ProtocolError(
                f"avfs printed no JSON object (exit code {proc.returncode}): {stdout[:200]!r} {stderr[:200]!r}",
                argv, stdout, stderr, proc.returncode,
            )
        if envelope and doc.get("kind") == ENVELOPE_KIND:
            return doc
        if "error" in doc:
            raise AvfsError(doc, argv, stderr, proc.returncode)
        if proc.returncode != 0:
            raise ProtocolError(
                f"avfs exited {proc.returncode} without an error document", argv, stdout, stderr, proc.returncode
            )
        return doc

    def _invoke(
        self,
        cls: Optional[Type[D]],
        path: Sequence[str],
        values: Sequence[Tuple[Any, bool]],
        flags: Sequence[Flag],
        *,
        scoped: bool,
        vault: Optional[str],
        input: Optional[bytes],
    ) -> Any:
        """Runs one command for :attr:`commands`; ``scoped`` passes --vault."""
        args = command_args(path, values, flags)
        doc = self.run_json(args, vault=self._selected(vault) if scoped else None, input=input,
                            envelope=cls is ProxyExecResult)
        return doc if cls is None else cls.from_dict(doc)

    def _call(self, cls: Type[D], args: Sequence[str], **kw: Any) -> D:
        return cls.from_dict(self.run_json(args, **kw))

    def _selected(self, vault: Optional[str]) -> Optional[str]:
        return vault or self.vault

    # --- version and vaults -----------------------------------------------

    def version(self) -> VersionInfo:
        return self._call(VersionInfo, ["version"])

    def vault_create(
        self,
        name: str,
        *,
        backend: Optional[str] = None,
        use: bool = False,
        max_size_mb: Optional[int] = None,
        max_files: Optional[int] = None,
        max_file_size_mb: Optional[int] = None,
    ) -> Vault:
        args = ["vault", "create"]
        if backend:
            args += ["--backend", backend]
        if use:
            args.append("--use")
        for flag, value in (("--max-size-mb", max_size_mb), ("--max-files", max_files),
                            ("--max-file-size-mb", max_file_size_mb)):
            if value is not None:
                args += [flag, str(value)]
        return self._call(Vault, args + ["--", name])

    def vault_list(self) -> VaultList:
        return self._call(VaultList, ["vault", "list"])

    def vault_info(self, name: Optional[str] = None) -> Vault:
        """Describe vault ``name`` (default: the client's vault, else the current one)."""
        name = self._selected(name)
        return self._call(Vault, ["vault", "info"] + (["--", name] if name else []))

    def vault_fork(self, source: str, name: str, *, use: bool = False) -> Fork:
        return self._call(Fork, ["vault", "fork"] + (["--use"] if use else []) + ["--", source, name])

    def vault_use(self, name: str) -> Vault:
        return self._call(Vault, ["vault", "use", "--", name])

    def vault_delete(self, name: str) -> VaultDeleted:
        """Delete a vault and its checkpoints. Calling this is the
        confirmation: ``--yes`` is always passed."""
        return self._call(VaultDeleted, ["vault", "delete", "--yes", "--", name])

    # --- checkpoints -------------------------------------------------------

    def checkpoint_save(
        self, name: Optional[str] = None, *, message: Optional[str] = None, vault: Optional[str] = None
    ) -> SavedCheckpoint:
        args = ["checkpoint", "save"]
        if message is not None:
            args += ["--message", message]
        args += ["--", name] if name else []
        return self._call(SavedCheckpoint, args, vault=self._selected(vault))

    def checkpoint_list(self, *, vault: Optional[str] = None) -> CheckpointList:
        return self._call(CheckpointList, ["checkpoint", "list"], vault=self._selected(vault))

    def checkpoint_info(self, name: str, *, vault: Optional[str] = None) -> Checkpoint:
        return self._call(Checkpoint, ["checkpoint", "info", "--", name], vault=self._selected(vault))

    def checkpoint_restore(self, name: str, *, vault: Optional[str] = None) -> Restored:
        return self._call(Restored, ["checkpoint", "restore", "--", name], vault=self._selected(vault))

    def checkpoint_delete(self, name: str, *, vault: Optional[str] = None) -> CheckpointDeleted:
        return self._call(CheckpointDeleted, ["checkpoint", "delete", "--", name], vault=self._selected(vault))

    def vault_merge(
        self, source: str, *, into: Optional[str] = None, dry_run: bool = False, on_conflict: str = "fail"
    ) -> VaultMerge:
        """Three-way merge of ``source`` into ``into`` (default: its parent)."""
        args = ["vault", "merge", "--on-conflict", on_conflict] + (["--dry-run"] if dry_run else [])
        args += (["--into", into] if into is not None else []) + ["--", source]
        return self._call(VaultMerge, args)

    def apply(
        self, host_dir: str, *, from_: Optional[str] = None, to: Optional[str] = None, dry_run: bool = False,
        force: bool = False, vault: Optional[str] = None,
    ) -> ApplyResult:
        """Write the changes from ``from_`` (default: the recorded origin) to
        ``to`` (default: the working state) into ``host_dir``."""
        args = ["apply"] + _opt(from_, "--from") + _opt(to, "--to") + (["--dry-run"] if dry_run else [])
        args += (["--force"] if force else []) + ["--", host_dir]
        return self._call(ApplyResult, args, vault=self._selected(vault))

    def checkpoint_diff(
        self, from_: Optional[str] = None, to: Optional[str] = None, *, vault: Optional[str] = None
    ) -> Diff:
        """Paths that differ between two states: ``CHECKPOINT``, ``vault:NAME``
        or ``vault:NAME@CHECKPOINT``. Defaults: the latest checkpoint and the
        working state of the selected vault."""
        if to is not None and from_ is None:
            raise ValueError("checkpoint_diff: give from_ when giving to")
        args = ["checkpoint", "diff", "--"] + [s for s in (from_, to) if s is not None]
        return self._call(Diff, args, vault=self._selected(vault))

    # --- files -------------------------------------------------------------

    def write(
        self, path: str, content: Union[str, bytes], *, append: bool = False, vault: Optional[str] = None
    ) -> WriteResult:
        """Write (or with ``append``, append to) a file. The content goes
        through stdin, so it may be binary and of any size."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        args = ["write"] + (["--append"] if append else []) + ["--", path]
        return self._call(WriteResult, args, vault=self._selected(vault), input=data)

    def cat(self, path: str, *, at: Optional[str] = None, vault: Optional[str] = None) -> CatResult:
        """Read a file; ``.data`` is its bytes, ``.text`` its text. ``at`` is
        a REF: ``@``, ``CHECKPOINT``, ``vault:NAME[@CHECKPOINT]``,
        ``run:ID`` or ``run:ID^after``."""
        return self._call(CatResult, ["cat"] + _at(at) + ["--", path], vault=self._selected(vault))

    def ls(
        self, path: str = "/", *, all: bool = False, at: Optional[str] = None, vault: Optional[str] = None
    ) -> Listing:
        return self._call(Listing, ["ls"] + (["--all"] if all else []) + _at(at) + ["--", path],
                          vault=self._selected(vault))

    def stat(
        self, path: str, *, dereference: bool = False, at: Optional[str] = None, vault: Optional[str] = None
    ) -> Stat:
        return self._call(Stat, ["stat"] + (["--dereference"] if dereference else []) + _at(at) + ["--", path],
                          vault=self._selected(vault))

    def diff(
        self, from_: Optional[str] = None, to: Optional[str] = None, *, vault: Optional[str] = None
    ) -> ContentDiff:
        """What changed between two REFs, each change with its git-format
        ``patch``. Defaults: the latest checkpoint and the working state."""
        if to is not None and from_ is None:
            raise ValueError("diff: give from_ when giving to")
        args = ["diff", "--"] + [s for s in (from_, to) if s is not None]
        return self._call(ContentDiff, args, vault=self._selected(vault))

    def mkdir(self, path: str, *, parents: bool = False, vault: Optional[str] = None) -> MkdirResult:
        return self._call(MkdirResult, ["mkdir"] + (["--parents"] if parents else []) + ["--", path],
                          vault=self._selected(vault))

    def rm(
        self, path: str, *, recursive: bool = False, force: bool = False, vault: Optional[str] = None
    ) -> RmResult:
        args = ["rm"] + (["--recursive"] if recursive else []) + (["--force"] if force else []) + ["--", path]
        return self._call(RmResult, args, vault=self._selected(vault))

    # --- mounts ------------------------------------------------------------

    def mount(self, mountpoint: StrPath, *, vault: Optional[str] = None, readonly: bool = False) -> Mount:
        """Mount a vault (default: the selected one) on an existing directory.
        The mount is served by its own process until :meth:`unmount`."""
        vault = self._selected(vault)
        args = ["mount"] + (["--readonly"] if readonly else []) + ["--"]
        return self._call(Mount, args + ([vault] if vault else []) + [os.fspath(mountpoint)])

    def unmount(self, mountpoint: StrPath, *, lazy: bool = False) -> Unmounted:
        return self._call(Unmounted, ["unmount"] + (["--lazy"] if lazy else []) + ["--", os.fspath(mountpoint)])

    def mounts(self, *, prune: bool = False) -> Mounts:
        return self._call(Mounts, ["mounts"] + (["--prune"] if prune else []))

    @contextmanager
    def mounted(
        self, mountpoint: StrPath, *, vault: Optional[str] = None, readonly: bool = False
    ) -> Iterator[Mount]:
        """Mount for the duration of a ``with`` block, and always unmount:
        lazily when files are still in use, so no mount is left behind."""
        m = self.mount(mountpoint, vault=vault, readonly=readonly)
        try:
            yield m
        finally:
            try:
                self.unmount(m.mountpoint)
            except AvfsError:
                self.unmount(m.mountpoint, lazy=True)

    # --- proxy and policy --------------------------------------------------

    def proxy_exec(
        self,
        command: Optional[Sequence[str]] = None,
        *,
        shell: Optional[str] = None,
        vault: Optional[str] = None,
        cwd: Optional[str] = None,
        timeout: Optional[Duration] = None,
        grace: Optional[Duration] = None,
        checkpoint: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        readonly: bool = False,
        approval: Optional[str] = None,
        keep_mount: bool = False,
        linger: Optional[Duration] = None,
        max_output: Optional[int] = None,
        stdin: Optional[Union[str, bytes]] = None,
        isolate: Optional[str] = None,
    ) -> ProxyExecResult:
        """Run one command in a vault through the policy-gated proxy.

        ``command`` is an argv list; ``shell`` a script for ``/bin/sh -c``
        (classified as a whole). With ``approval`` (the id of an approved
        run), the command may be left out: the approved request runs.
        ``timeout``/``grace`` are milliseconds (a bare number, as the
        envelope's ``timeout_ms``), a timedelta or a Go duration string
        ("30s"; "0" is no limit); ``checkpoint`` is auto, always or never; ``env``
        is added to the command's environment (only its keys are recorded);
        ``stdin`` is fed to the command. ``linger`` (a duration, "0" to
        unmount after the run) is how long a mount the run starts stays,
        idle, for the next run; avfs's default is a minute. ``isolate`` is
        auto (avfs's default: namespaces where the host can make them), on
        (else IsolationUnavailable) or off; ``result.isolation`` says what
        was enforced.

        Returns the envelope whenever avfs printed one: a denied command
        (exit 14), one awaiting approval (15), one that timed out (124, state
        timed_out), one interrupted by SIGINT or SIGTERM to avfs (130, state
        interrupted) or failed are results, not exceptions. Check ``.success`` and
        ``.state``. Raises :class:`AvfsError` only for errors before a run is
        recorded, and for ``VaultLocked``, missing ``cwd`` or refused
        approvals.
        """
        args, data = _exec_args(
            command, shell=shell, cwd=cwd, timeout=timeout, grace=grace, checkpoint=checkpoint, env=env,
            readonly=readonly, approval=approval, keep_mount=keep_mount, linger=linger, max_output=max_output,
            isolate=isolate, stdin=stdin,
        )
        doc = self.run_json(args, vault=self._selected(vault), input=data, envelope=True)
        return ProxyExecResult.from_dict(doc)

    def proxy_stream(
        self,
        command: Optional[Sequence[str]] = None,
        *,
        shell: Optional[str] = None,
        vault: Optional[str] = None,
        **options: Any,
    ) -> Iterator[Union[StreamOutput, ProxyExecResult]]:
        """Run a command as :meth:`proxy_exec` does, with ``--stream``: an
        iterator of its output as it comes (:class:`StreamOutput`, in the
        order read), then the run's :class:`ProxyExecResult`, last.

        Takes proxy_exec's options. Raises :class:`AvfsError` when no run
        was recorded, as proxy_exec does; closing the iterator early stops
        avfs with SIGTERM, which interrupts the run (state interrupted)::

            for ev in avfs.proxy_stream(shell="make"):
                if isinstance(ev, StreamOutput):
                    sys.stdout.write(ev.text)
                else:
                    print(ev.state, ev.exit_code)
        """
        args, data = _exec_args(command, shell=shell, **options)
        argv = self.argv(["proxy", "exec", "--stream", *args[2:]], self._selected(vault))
        env = {**os.environ, **self.env} if self.env else None
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        errs: List[bytes] = []
        reader = threading.Thread(target=lambda: errs.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        if data is not None:
            try:
                proc.stdin.write(data)  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except BrokenPipeError:
                pass  # avfs refused the request before reading; its exit says why
        error: Optional[Dict[str, Any]] = None
        result = False
        lines: List[str] = []
        finished = False
        try:
            for raw in proc.stdout:  # type: ignore[union-attr]
                line = raw.decode("utf-8", errors="replace")
                lines.append(line)
                if not line.strip():
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    raise ProtocolError(
                        f"avfs printed a line that is not JSON: {line[:200]!r}", argv, "".join(lines), "", None
                    )
                kind = ev.get("event") if isinstance(ev, dict) else None
                if kind in ("stdout", "stderr"):
                    b = ev["data"].encode("utf-8") if "data" in ev else base64.b64decode(ev["data_base64"])
                    yield StreamOutput(stream=kind, data=b)
                elif kind == "result":
                    result = True
                    yield ProxyExecResult.from_dict(ev["envelope"])
                elif kind == "error":
                    error = ev["error"]
            finished = True
        finally:
            if not finished and proc.poll() is None:
                proc.terminate()
            proc.wait()
            reader.join()
        stderr = b"".join(errs).decode("utf-8", errors="replace")
        if error is not None:
            raise AvfsError(error, argv, stderr, proc.returncode)
        if not result:
            raise ProtocolError(
                f"avfs exited {proc.returncode} without a result event", argv, "".join(lines), stderr, proc.returncode
            )

    def proxy_show(self, run_id: str) -> ProxyExecResult:
        return ProxyExecResult.from_dict(self.run_json(["proxy", "show", "--", run_id], envelope=True))

    def proxy_history(self, *, vault: Optional[str] = None, limit: Optional[int] = None) -> ProxyHistory:
        """Kept runs, oldest first (of ``vault`` or the client's vault, if either is set)."""
        args = ["proxy", "history"] + (["--limit", str(limit)] if limit is not None else [])
        return self._call(ProxyHistory, args, vault=self._selected(vault))

    def proxy_undo(self, run_id: Optional[str] = None, *, vault: Optional[str] = None) -> UndoResult:
        """Restore the state just before run ``run_id`` (default: the vault's
        latest run that kept its checkpoint)."""
        args = ["proxy", "undo"] + (["--", run_id] if run_id else [])
        return self._call(UndoResult, args, vault=self._selected(vault))

    def proxy_approve(self, run_id: str) -> ApprovalResult:
        return self._call(ApprovalResult, ["proxy", "approve", "--", run_id])

    def proxy_reject(self, run_id: str) -> ApprovalResult:
        return self._call(ApprovalResult, ["proxy", "reject", "--", run_id])

    def policy_check(
        self,
        command: Optional[Sequence[str]] = None,
        *,
        shell: Optional[str] = None,
        cwd: Optional[str] = None,
        vault: Optional[str] = None,
    ) -> PolicyCheck:
        """The policy's decision for a command, without running anything."""
        if isinstance(command, (str, bytes)):
            raise TypeError("command is an argv list; pass a script as shell=")
        if (command is None) == (shell is None):
            raise ValueError("give exactly one of command and shell")
        args = ["policy", "check"] + (["--cwd", cwd] if cwd is not None else [])
        args += ["--shell", shell] if shell is not None else ["--", *(command or [])]
        return self._call(PolicyCheck, args, vault=self._selected(vault))


def _exec_args(
    command: Optional[Sequence[str]] = None,
    *,
    shell: Optional[str] = None,
    cwd: Optional[str] = None,
    timeout: Optional[Duration] = None,
    grace: Optional[Duration] = None,
    checkpoint: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    readonly: bool = False,
    approval: Optional[str] = None,
    keep_mount: bool = False,
    linger: Optional[Duration] = None,
    max_output: Optional[int] = None,
    isolate: Optional[str] = None,
    stdin: Optional[Union[str, bytes]] = None,
) -> Tuple[List[str], Optional[bytes]]:
    """The arguments of ``proxy exec`` for proxy_exec's options, and the stdin to feed it."""
    if isinstance(command, (str, bytes)):
        raise TypeError("command is an argv list; pass a script as shell=")
    if command is not None and shell is not None:
        raise ValueError("give command or shell, not both")
    if command is None and shell is None and approval is None:
        raise ValueError("give command, shell or approval")
    args: List[str] = ["proxy", "exec"]
    if cwd is not None:
        args += ["--cwd", cwd]
    if timeout is not None:
        args += ["--timeout", go_duration(timeout)]
    if grace is not None:
        args += ["--grace", go_duration(grace)]
    if checkpoint is not None:
        args += ["--checkpoint", checkpoint]
    for key, value in (env or {}).items():
        args += ["--env", f"{key}={value}"]
    if readonly:
        args.append("--readonly")
    if approval is not None:
        args += ["--approval", approval]
    if keep_mount:
        args.append("--keep-mount")
    if linger is not None:
        args += ["--linger", go_duration(linger)]
    if max_output is not None:
        args += ["--max-output", str(max_output)]
    if isolate is not None:
        args += ["--isolate", isolate]
    data = None
    if stdin is not None:
        args.append("--stdin")
        data = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin)
    if shell is not None:
        args += ["--shell", shell]
    if command is not None:
        args += ["--", *command]
    return args, data
