"""agentvfs: the avfs command and a typed Python client for it.

avfs is a workspace runtime for AI agents: vaults (one-file filesystems)
that fork and checkpoint in milliseconds, and a policy-gated proxy that runs
commands in them. This package ships the binary (in platform wheels) and

- ``agentvfs`` / ``python -m agentvfs``, which run it unchanged;
- :class:`Avfs`, a client that drives ``avfs ... --json`` and returns
  dataclasses (:mod:`agentvfs.models`), raising :class:`AvfsError` for error
  documents.

See docs/guides/python.md in the avfs repository.
"""

from ._resolve import cache_binary, package_binary, resolve_binary
from ._version import __version__
from .client import Avfs
from .errors import Attempt, AvfsError, AvfsException, BinaryNotFound, ProtocolError
from .models import (
    Approval,
    ApprovalResult,
    CatResult,
    Change,
    Checkpoint,
    CheckpointDeleted,
    CheckpointList,
    CommandDecision,
    Decision,
    Diff,
    DiffEntry,
    DiffSummary,
    Entry,
    Fork,
    HistoryRun,
    Listing,
    MkdirResult,
    Mount,
    MountRecord,
    Mounts,
    PolicyCheck,
    PolicyRequest,
    ProxyExecResult,
    ProxyHistory,
    ProxyRequest,
    ProxyResult,
    Quota,
    Restored,
    RmResult,
    RunCheckpoint,
    RunError,
    SavedCheckpoint,
    StageTimes,
    Stat,
    Unmounted,
    UndoResult,
    Usage,
    Vault,
    VaultDeleted,
    VaultList,
    VaultSummary,
    VersionInfo,
    WriteResult,
)

__all__ = [
    "__version__",
    "Avfs",
    "AvfsError",
    "AvfsException",
    "Attempt",
    "BinaryNotFound",
    "ProtocolError",
    "resolve_binary",
    "package_binary",
    "cache_binary",
    "Approval",
    "ApprovalResult",
    "CatResult",
    "Change",
    "Checkpoint",
    "CheckpointDeleted",
    "CheckpointList",
    "CommandDecision",
    "Decision",
    "Diff",
    "DiffEntry",
    "DiffSummary",
    "Entry",
    "Fork",
    "HistoryRun",
    "Listing",
    "MkdirResult",
    "Mount",
    "MountRecord",
    "Mounts",
    "PolicyCheck",
    "PolicyRequest",
    "ProxyExecResult",
    "ProxyHistory",
    "ProxyRequest",
    "ProxyResult",
    "Quota",
    "Restored",
    "RmResult",
    "RunCheckpoint",
    "RunError",
    "SavedCheckpoint",
    "StageTimes",
    "Stat",
    "Unmounted",
    "UndoResult",
    "Usage",
    "Vault",
    "VaultDeleted",
    "VaultList",
    "VaultSummary",
    "VersionInfo",
    "WriteResult",
]
