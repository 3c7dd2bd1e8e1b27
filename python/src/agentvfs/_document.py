"""What the generated models (agentvfs.models) build on: parsing from JSON,
and the few hand-written conveniences mixed into generated classes.

Parsing follows the contract's rule that fields may be added but never
removed:

- a field the class does not know is ignored, and stays reachable through
  ``.raw`` (the whole JSON object as printed);
- a field the schema requires must be there, or :class:`ProtocolError` says
  which one is missing; fields the schema marks optional default to None.
"""

from __future__ import annotations

import base64
import keyword
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Optional, Type, TypeVar

from .errors import ProtocolError

if TYPE_CHECKING:
    from .models import Change

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
        known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
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


class CatContent:
    """cat: ``content`` is text when ``encoding`` is utf-8, else base64."""

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


class EnvelopeAccess:
    """Short paths into a proxy envelope. Read ``success``, ``state`` and
    ``exit_code``: a denied command, one awaiting approval and one that timed
    out all come back as an envelope, not as an exception."""

    result: Any

    @property
    def state(self) -> str:
        """How the run ended: one of RUN_STATES."""
        return str(self.result.state)

    @property
    def exit_code(self) -> Optional[int]:
        """The command's exit code; None when it did not run."""
        return self.result.exit_code  # type: ignore[no-any-return]

    @property
    def stdout(self) -> str:
        return str(self.result.stdout)

    @property
    def stderr(self) -> str:
        return str(self.result.stderr)

    @property
    def changes(self) -> "List[Change]":
        return list(self.result.changes)


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
