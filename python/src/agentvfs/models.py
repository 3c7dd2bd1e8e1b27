"""Typed results: one dataclass per JSON document avfs prints.

Each class mirrors a schema in docs/schema/ field for field (tests/
test_schema_sync.py fails when they drift). Parsing follows the contract's
rule that fields may be added but never removed:

- a field the class does not know is ignored, and stays reachable through
  ``.raw`` (the whole JSON object as printed);
- a field the schema requires must be there, or :class:`ProtocolError` says
  which one is missing; fields the schema marks optional default to None.

Times stay strings, exactly as printed (RFC 3339, UTC, nanoseconds):
``datetime`` cannot hold nanoseconds, and a string sorts and compares as
well. A JSON key that is a Python keyword gets a trailing underscore
(``from`` is ``from_``).
"""

from __future__ import annotations

import base64
import keyword
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type, TypeVar

from .errors import ProtocolError

T = TypeVar("T", bound="Document")


def attr_name(key: str) -> str:
    """The dataclass field name of a JSON key."""
    return key + "_" if keyword.iskeyword(key) else key


def json_key(name: str) -> str:
    """The JSON key of a dataclass field name."""
    base = name[:-1]
    return base if name.endswith("_") and keyword.iskeyword(base) else name


class Document:
    """Mixin of every result class: parsing from JSON, and ``raw``.

    ``nested`` names the fields that hold other documents (an object, a list
    of them, or null), so parsing needs no type-hint evaluation and works the
    same on every Python version.
    """

    nested: ClassVar[Dict[str, Type["Document"]]] = {}

    @classmethod
    def from_dict(cls: Type[T], data: Any) -> T:
        if not isinstance(data, dict):
            raise ProtocolError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        kwargs: Dict[str, Any] = {}
        for key, value in data.items():
            name = attr_name(key)
            if name not in known:
                continue  # a field added after this client was written
            sub = cls.nested.get(name)
            if sub is not None and value is not None:
                value = [sub.from_dict(v) for v in value] if isinstance(value, list) else sub.from_dict(value)
            kwargs[name] = value
        missing = [
            json_key(n)
            for n, f in known.items()
            if n not in kwargs and f.default is MISSING and f.default_factory is MISSING
        ]
        if missing:
            raise ProtocolError(f"{cls.__name__}: the document lacks {', '.join(missing)}: {data!r}")
        obj = cls(**kwargs)
        object.__setattr__(obj, "_raw", data)
        return obj

    @property
    def raw(self) -> Dict[str, Any]:
        """The JSON object this was parsed from, unknown fields included."""
        return getattr(self, "_raw", {})


# --- shared pieces ---------------------------------------------------------


@dataclass(frozen=True)
class Usage(Document):
    bytes: int
    files: int


@dataclass(frozen=True)
class Quota(Document):
    """Quotas of a vault; 0 means unlimited."""

    max_size_mb: int
    max_files: int
    max_file_size_mb: int


# --- version ---------------------------------------------------------------


@dataclass(frozen=True)
class VersionInfo(Document):
    version: str
    go_version: str
    os: str
    arch: str
    format_version: int
    json_contract_version: int
    backends: List[str]
    default_backend: str


# --- vaults ----------------------------------------------------------------


@dataclass(frozen=True)
class Origin(Document):
    """Where a vault's content came from (``vault create --from``)."""

    host_dir: str
    checkpoint: str
    recorded_at: str


@dataclass(frozen=True)
class VaultSpace(Document):
    """vault info: who needs the bytes of the vault's file."""

    live_bytes: int
    checkpoint_bytes: int
    garbage_bytes: int
    free_bytes: int
    file_bytes: int


@dataclass(frozen=True)
class Vault(Document):
    """vault create, vault info and vault use (``space``: vault info only)."""

    name: str
    vault_id: str
    backend: str
    path: str
    format_version: int
    created_at: str
    current: bool
    parent: Optional[str]
    forks: List[str]
    checkpoints: int
    usage: Usage
    quota: Quota
    file_size: int
    origin: Optional[Origin] = None
    space: Optional[VaultSpace] = None
    nested = {"usage": Usage, "quota": Quota, "origin": Origin, "space": VaultSpace}


@dataclass(frozen=True)
class VaultSummary(Document):
    """One vault of ``vault list``; a vault that cannot be opened has ``error``."""

    name: str
    backend: str
    path: str
    current: bool
    parent: Optional[str]
    vault_id: Optional[str] = None
    format_version: Optional[int] = None
    created_at: Optional[str] = None
    error: Optional[str] = None
    message: Optional[str] = None


@dataclass(frozen=True)
class VaultList(Document):
    vaults: List[VaultSummary]
    current: Optional[str]
    nested = {"vaults": VaultSummary}


@dataclass(frozen=True)
class Fork(Document):
    """vault fork: the new vault ``name`` stands on ``source``."""

    source: str
    name: str
    vault_id: str
    path: str
    backend: str
    current: bool
    duration_ms: float


@dataclass(frozen=True)
class VaultDeleted(Document):
    name: str
    path: str
    deleted: bool
    checkpoints: int
    file_size: int


# --- checkpoints -----------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint(Document):
    """checkpoint info, and each entry of checkpoint list."""

    name: str
    vault: str
    created_at: str
    message: str
    bytes: int
    files: int


@dataclass(frozen=True)
class SavedCheckpoint(Document):
    """checkpoint save: the checkpoint, and how long saving took."""

    name: str
    vault: str
    created_at: str
    message: str
    bytes: int
    files: int
    duration_ms: float


@dataclass(frozen=True)
class CheckpointList(Document):
    vault: str
    checkpoints: List[Checkpoint]
    nested = {"checkpoints": Checkpoint}


@dataclass(frozen=True)
class Restored(Document):
    name: str
    vault: str
    duration_ms: float


@dataclass(frozen=True)
class CheckpointDeleted(Document):
    name: str
    vault: str
    deleted: bool


@dataclass(frozen=True)
class DiffEntry(Document):
    """One changed path; ``kind`` is added, modified, deleted, type_changed or mode_changed."""

    path: str
    kind: str
    type: str
    size_before: int
    size_after: int


@dataclass(frozen=True)
class DiffSummary(Document):
    added: int
    modified: int
    deleted: int
    type_changed: int
    mode_changed: int


@dataclass(frozen=True)
class Diff(Document):
    """checkpoint diff: ``from_``/``to`` are ``vault:NAME`` or ``vault:NAME@CHECKPOINT``."""

    from_: str
    to: str
    changes: List[DiffEntry]
    summary: DiffSummary
    nested = {"changes": DiffEntry, "summary": DiffSummary}


@dataclass(frozen=True)
class ContentDiffEntry(Document):
    """One changed path of ``avfs diff``, with its git-format ``patch``
    (None when ``binary`` or when git keeps nothing of the path)."""

    path: str
    kind: str
    type: str
    size_before: int
    size_after: int
    patch: Optional[str]
    binary: bool
    insertions: int
    deletions: int


@dataclass(frozen=True)
class ContentDiff(Document):
    """avfs diff: ``from_``/``to`` are ``vault:NAME``, ``vault:NAME@CHECKPOINT``
    or ``vault:NAME@CHECKPOINT^after``."""

    from_: str
    to: str
    changes: List[ContentDiffEntry]
    summary: DiffSummary
    nested = {"changes": ContentDiffEntry, "summary": DiffSummary}


# --- files -----------------------------------------------------------------


@dataclass(frozen=True)
class WriteResult(Document):
    path: str
    size: int
    bytes_written: int
    appended: bool
    created: bool


@dataclass(frozen=True)
class CatResult(Document):
    """cat: ``content`` is text when ``encoding`` is utf-8, else base64."""

    path: str
    size: int
    encoding: str
    content: str

    @property
    def data(self) -> bytes:
        """The file's bytes, whatever the encoding."""
        if self.encoding == "base64":
            return base64.b64decode(self.content)
        return self.content.encode("utf-8")

    @property
    def text(self) -> str:
        """The file as text (UTF-8; undecodable bytes replaced)."""
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Entry(Document):
    """One entry of ls; ``target`` is set for symlinks."""

    name: str
    type: str
    size: int
    mode: str
    modified: str
    ino: int
    nlink: int
    target: Optional[str] = None


@dataclass(frozen=True)
class Listing(Document):
    path: str
    entries: List[Entry]
    nested = {"entries": Entry}


@dataclass(frozen=True)
class Stat(Document):
    path: str
    type: str
    size: int
    mode: str
    ino: int
    nlink: int
    uid: int
    gid: int
    atime: str
    mtime: str
    ctime: str
    xattrs: List[str]
    target: Optional[str] = None


@dataclass(frozen=True)
class MkdirResult(Document):
    path: str
    created: bool
    mode: str


@dataclass(frozen=True)
class RmResult(Document):
    """rm: ``removed`` counts every name removed, those below a directory included."""

    path: str
    existed: bool
    removed: int


# --- mounts ----------------------------------------------------------------


@dataclass(frozen=True)
class Mount(Document):
    """mount: ``pid`` is the process serving the mount."""

    vault: str
    mountpoint: str
    pid: int
    readonly: bool
    transport: str


@dataclass(frozen=True)
class MountRecord(Document):
    """One mount of ``mounts``; ``live`` is false when its server died."""

    vault: str
    mountpoint: str
    pid: int
    readonly: bool
    started_at: str
    transport: str
    live: bool
    idle_timeout_ms: Optional[int] = None


@dataclass(frozen=True)
class Mounts(Document):
    mounts: List[MountRecord]
    pruned: Optional[List[MountRecord]] = None
    nested = {"mounts": MountRecord, "pruned": MountRecord}


@dataclass(frozen=True)
class Unmounted(Document):
    mountpoint: str
    lazy: bool
    vault: Optional[str] = None
    pid: Optional[int] = None


# --- policy and proxy ------------------------------------------------------


@dataclass(frozen=True)
class CommandDecision(Document):
    """The policy's decision for one simple command of a request."""

    program: str
    args: List[str]
    action: str
    categories: List[str]
    reason: str
    rule: str
    dynamic: bool = False  # an argument is known only at run time


@dataclass(frozen=True)
class Decision(Document):
    """The policy's decision: ``action`` is allow, allow_with_checkpoint,
    require_approval or deny (the strictest over ``commands``). ``dynamic``
    is true when some word is known only at run time; such a request is
    never allowed without a checkpoint."""

    action: str
    categories: List[str]
    reason: str
    rule: str
    commands: List[CommandDecision]
    dynamic: bool = False
    nested = {"commands": CommandDecision}


@dataclass(frozen=True)
class Approval(Document):
    """``status`` is pending, approved, rejected or used. ``mac`` binds an
    approval to its request (null until a person approves)."""

    id: str
    status: str
    expires_at: str
    decided_at: Optional[str]
    used_by: Optional[str]
    mac: Optional[str] = None


@dataclass(frozen=True)
class ProxyRequest(Document):
    """What was asked of ``proxy exec``, defaults filled in."""

    vault: str
    cwd: str
    readonly: bool
    keep_mount: bool
    linger_ms: float
    mountpoint: Optional[str]
    checkpoint_mode: str
    command: List[str]
    command_mode: str
    timeout: str
    timeout_ms: float
    grace_ms: float
    max_output: int
    stdin: bool
    env_keys: List[str]
    approval: Optional[str]
    isolate: Optional[str] = None


@dataclass(frozen=True)
class StageTimes(Document):
    """Milliseconds spent in each stage of a run."""

    request: float
    classify: float
    checkpoint: float
    mount: float
    execute: float
    summarize: float
    report: float


@dataclass(frozen=True)
class RunCheckpoint(Document):
    """The checkpoint of the state just before a run (``kept`` false: deleted after the summary)."""

    name: str
    requested: bool
    kept: bool


@dataclass(frozen=True)
class Change(Document):
    """One path a run changed; ``from_`` is the old path of a rename."""

    path: str
    kind: str
    type: str
    from_: Optional[str]
    size_before: int
    size_after: int


@dataclass(frozen=True)
class RunError(Document):
    """Why a run ended in state ``failed``."""

    error: str
    message: str


@dataclass(frozen=True)
class Isolation(Document):
    """The kernel boundary a command ran in: ``mode`` namespaces or none,
    ``network`` none (its own loopback) or host; ``requested`` is the
    --isolate asked for (auto, on, off)."""

    requested: str
    mode: str
    network: str
    hidden: List[str]
    writable: List[str]
    read_only: List[str]
    reason: str


@dataclass(frozen=True)
class OverlayCost(Document):
    lowers: int
    materialized: bool
    materialize_ms: float
    materialized_files: int
    materialized_bytes: int
    ingest_ms: float
    ingested_files: int
    ingested_bytes: int
    deleted: int
    reused: bool


@dataclass(frozen=True)
class ProxyResult(Document):
    vault: str
    mountpoint: Optional[str]
    mount_reused: bool
    transport: Optional[str]
    transport_reason: Optional[str]
    overlay: Optional[OverlayCost]
    cwd: str
    command: List[str]
    exit_code: Optional[int]
    signal: Optional[str]
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    duration_ms: float
    stage_ms: StageTimes
    checkpoint: Optional[RunCheckpoint]
    changed_files: int
    changes: List[Change]
    renames_detected: bool
    decision: Decision
    isolation: Optional[Isolation]
    state: str
    timed_out: bool
    approval: Optional[Approval]
    error: Optional[RunError]
    undone_by: Optional[str]
    nested = {
        "stage_ms": StageTimes,
        "overlay": OverlayCost,
        "checkpoint": RunCheckpoint,
        "changes": Change,
        "decision": Decision,
        "isolation": Isolation,
        "approval": Approval,
        "error": RunError,
    }


@dataclass(frozen=True)
class ProxyExecResult(Document):
    """The envelope of one proxy run (proxy exec and proxy show).

    Read ``success``, ``result.state`` and ``result.exit_code``: a denied
    command, one awaiting approval and one that timed out all come back as an
    envelope, not as an exception.
    """

    schema_version: int
    kind: str
    id: str
    created_at: str
    success: bool
    request: ProxyRequest
    result: ProxyResult
    nested = {"request": ProxyRequest, "result": ProxyResult}

    @property
    def state(self) -> str:
        """How the run ended: one of RUN_STATES."""
        return self.result.state

    @property
    def exit_code(self) -> Optional[int]:
        """The command's exit code; None when it did not run."""
        return self.result.exit_code

    @property
    def stdout(self) -> str:
        return self.result.stdout

    @property
    def stderr(self) -> str:
        return self.result.stderr

    @property
    def changes(self) -> List[Change]:
        return self.result.changes


@dataclass(frozen=True)
class HistoryRun(Document):
    id: str
    created_at: str
    vault: str
    command: List[str]
    state: str
    action: str
    exit_code: Optional[int]
    timed_out: bool
    changed_files: int
    duration_ms: float
    undone_by: Optional[str]


@dataclass(frozen=True)
class ProxyHistory(Document):
    """proxy history: the kept runs, oldest first."""

    schema_version: int
    kind: str
    runs: List[HistoryRun]
    nested = {"runs": HistoryRun}


@dataclass(frozen=True)
class ApprovalResult(Document):
    """proxy approve and proxy reject: the request and its approval."""

    schema_version: int
    kind: str
    id: str
    vault: str
    cwd: str
    command: List[str]
    approval: Approval
    nested = {"approval": Approval}


@dataclass(frozen=True)
class UndoResult(Document):
    """proxy undo: ``run``'s checkpoint was restored; ``undone`` lists every run undone."""

    schema_version: int
    kind: str
    vault: str
    run: str
    checkpoint: str
    undone: List[str]


@dataclass(frozen=True)
class PolicyRequest(Document):
    """What policy check classified: ``argv`` or ``shell``, ``cwd``, and the
    ``env`` assignments given with ``--env``."""

    argv: Optional[List[str]] = None
    shell: Optional[str] = None
    cwd: Optional[str] = None
    env: Optional[List[str]] = None


@dataclass(frozen=True)
class PolicyCheck(Document):
    schema_version: int
    kind: str
    vault: Optional[str]
    request: PolicyRequest
    decision: Decision
    isolation: Optional[Isolation]
    nested = {"request": PolicyRequest, "decision": Decision, "isolation": Isolation}


@dataclass(frozen=True)
class MergeApplied(Document):
    path: str
    kind: str


@dataclass(frozen=True)
class MergeConflict(Document):
    """``kind`` is both_modified, modify_delete, add_add or type_changed."""

    path: str
    kind: str
    ours: str
    theirs: str


@dataclass(frozen=True)
class VaultMerge(Document):
    """vault merge: ``checkpoint`` is the target's checkpoint taken first
    (restore it to undo), None when nothing changed."""

    source: str
    target: str
    base: str
    applied: List[MergeApplied]
    conflicts: List[MergeConflict]
    checkpoint: Optional[str]
    merged: bool
    dry_run: bool
    nested = {"applied": MergeApplied, "conflicts": MergeConflict}


@dataclass(frozen=True)
class ApplyEntry(Document):
    path: str
    kind: str


@dataclass(frozen=True)
class ApplyNote(Document):
    path: str
    reason: str


@dataclass(frozen=True)
class ApplyResult(Document):
    """apply: what was written into ``host_dir``, what conflicted (left alone)."""

    from_: str
    to: str
    host_dir: str
    dry_run: bool
    applied: List[ApplyEntry]
    conflicts: List[ApplyNote]
    skipped: List[ApplyNote]
    nested = {"applied": ApplyEntry, "conflicts": ApplyNote, "skipped": ApplyNote}


#: The schema in docs/schema/ that each result class parses; the schema
#: sync test walks these.
# How a run ends (ProxyExecResult.state, HistoryRun.state): completed (the
# command exited by itself), timed_out (its timeout stopped it),
# interrupted (SIGINT or SIGTERM to avfs stopped it, or a stage before it;
# exit code 130), denied, awaiting_approval, failed. The same list as the
# "state" enum of docs/schema/proxy-exec.json (test_schema_sync checks).
RUN_STATES: Tuple[str, ...] = ("completed", "timed_out", "interrupted", "denied", "awaiting_approval", "failed")


@dataclass(frozen=True)
class StreamOutput:
    """A piece of a command's output, as ``proxy exec --stream`` reports it
    while the command runs (docs/schema/proxy-exec-stream.json):
    :meth:`Avfs.proxy_stream` yields these, then the run's envelope."""

    stream: str  # "stdout" or "stderr"
    data: bytes

    @property
    def text(self) -> str:
        """The piece as text; bytes that are not UTF-8 become U+FFFD."""
        return self.data.decode("utf-8", errors="replace")


SCHEMAS: Dict[str, Type[Document]] = {
    "version.json": VersionInfo,
    "vault-info.json": Vault,
    "vault-list.json": VaultList,
    "vault-fork.json": Fork,
    "vault-delete.json": VaultDeleted,
    "checkpoint.json": Checkpoint,
    "checkpoint-save.json": SavedCheckpoint,
    "checkpoint-list.json": CheckpointList,
    "checkpoint-restore.json": Restored,
    "checkpoint-delete.json": CheckpointDeleted,
    "diff.json": Diff,
    "content-diff.json": ContentDiff,
    "vault-merge.json": VaultMerge,
    "apply.json": ApplyResult,
    "write.json": WriteResult,
    "cat.json": CatResult,
    "ls.json": Listing,
    "stat.json": Stat,
    "mkdir.json": MkdirResult,
    "rm.json": RmResult,
    "mount.json": Mount,
    "mounts.json": Mounts,
    "unmount.json": Unmounted,
    "proxy-exec.json": ProxyExecResult,
    "proxy-history.json": ProxyHistory,
    "proxy-approval.json": ApprovalResult,
    "proxy-undo.json": UndoResult,
    "policy-check.json": PolicyCheck,
}
