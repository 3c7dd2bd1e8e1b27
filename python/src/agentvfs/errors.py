"""Exceptions of the agentvfs package.

Three things can go wrong when Python drives avfs, and each has its own type
so a caller can tell them apart without parsing messages:

- avfs ran and answered with an error document: :class:`AvfsError`, which
  carries the document's stable ``error`` type name and ``exit_code``;
- avfs could not be found: :class:`BinaryNotFound`, listing every place looked
  at, in order;
- avfs printed something that is not the contract (not one JSON object, a
  missing field): :class:`ProtocolError`, a bug in avfs or a version skew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence

if TYPE_CHECKING:
    from .models import ErrorKind


class AvfsException(Exception):
    """Base class of every exception raised by this package."""


class AvfsError(AvfsException):
    """avfs answered with an error document (docs/schema/error.json).

    ``error`` is the stable type name (``VaultNotFound``, ``VaultLocked``,
    ...; one of :data:`agentvfs.ERROR_KINDS`, typed :data:`agentvfs.ErrorKind`;
    see docs/json-contract.md), ``exit_code`` the process exit code the
    contract assigns to it, ``hint`` what a person can do (or None), and
    ``document`` the whole document, context fields (``op``, ``path``,
    ``vault``, ``forks``, ...) included. ``message`` is for people and may
    change between versions: branch on ``error``, not on it.
    """

    def __init__(
        self,
        document: Dict[str, Any],
        argv: Optional[Sequence[str]] = None,
        stderr: str = "",
        returncode: Optional[int] = None,
    ) -> None:
        self.document: Dict[str, Any] = document
        self.error: "ErrorKind" = str(document.get("error", ""))  # type: ignore[assignment]
        self.message: str = str(document.get("message", ""))
        code = document.get("exit_code", returncode)
        self.exit_code: Optional[int] = code if isinstance(code, int) else returncode
        self.hint: Optional[str] = document.get("hint")
        self.argv: List[str] = list(argv or [])
        self.stderr: str = stderr
        text = f"{self.error}: {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        super().__init__(text)


class ProtocolError(AvfsException):
    """avfs's output broke the JSON contract.

    Raised when stdout is not exactly one JSON object, when a success
    document lacks a field the contract says is always there, or when the
    exit code is not 0 without an error document. The raw output is kept for
    the bug report.
    """

    def __init__(
        self,
        message: str,
        argv: Optional[Sequence[str]] = None,
        stdout: str = "",
        stderr: str = "",
        returncode: Optional[int] = None,
    ) -> None:
        self.argv: List[str] = list(argv or [])
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        super().__init__(message)


class Attempt(NamedTuple):
    """One place where the avfs binary was looked for, and why it did not do."""

    source: str
    location: str
    reason: str


class BinaryNotFound(AvfsException, FileNotFoundError):
    """No usable avfs binary; ``tried`` lists every place looked at, in order.

    A subclass of FileNotFoundError as well, so code that already handles a
    missing program keeps working.
    """

    def __init__(self, tried: Sequence[Attempt]) -> None:
        self.tried: List[Attempt] = list(tried)
        lines = ["no usable avfs binary; tried, in order:"]
        lines += [f"  {a.source}: {a.location}: {a.reason}" for a in self.tried]
        lines.append(
            "install a platform wheel of agentvfs-cli, set AGENTVFS_BIN to an avfs "
            "binary, or put avfs on PATH"
        )
        super().__init__("\n".join(lines))

    @property
    def document(self) -> Dict[str, Any]:
        """The failure as an error document, for ``agentvfs ... --json``.

        The type is not one of avfs's own, so by the contract's rule for
        unlisted types its exit code is 1.
        """
        return {
            "error": "BinaryNotFound",
            "message": str(self),
            "exit_code": 1,
            "hint": "set AGENTVFS_BIN, install a platform wheel, or put avfs on PATH",
            "tried": [a._asdict() for a in self.tried],
        }
