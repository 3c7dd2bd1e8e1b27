"""Command lines for avfs, built the same way by every method: the command's
words, its flags, then ``--`` and the positional values, so a value that
starts with "-" is never read as an option. The TypeScript client's
args.ts follows the same rules and units."""

from __future__ import annotations

import datetime
import re
from typing import Any, List, NamedTuple, Sequence, Tuple, Union

#: A duration: a number is milliseconds (as the envelope's ``timeout_ms``,
#: ``grace_ms`` and ``linger_ms``), a string either a bare number (also
#: milliseconds) or a Go duration ("1.5s", "200ms", "1m30s", "0"), a
#: :class:`datetime.timedelta` what it says.
Duration = Union[str, int, float, datetime.timedelta]

_BARE_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")


def go_duration(value: Duration) -> str:
    """A duration as avfs's flags take it: a Go duration string.

    Numbers (and strings that are bare numbers) are milliseconds; other
    strings are passed through for avfs to check. Microseconds are the unit
    sent for numbers, so no float formatting ever reaches Go.
    """
    if isinstance(value, str):
        if not _BARE_NUMBER.fullmatch(value):
            return value
        value = float(value)
    if isinstance(value, datetime.timedelta):
        micros = value.total_seconds() * 1_000_000
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        micros = float(value) * 1_000
    else:
        raise TypeError(f"a duration is milliseconds, a timedelta or a Go duration string, not {value!r}")
    if not micros >= 0 or micros == float("inf"):
        raise ValueError(f"a duration must be a finite number >= 0: {value!r}")
    return f"{round(micros)}us"


class Flag(NamedTuple):
    """One flag of a call: its name (``--max-output``), its type in
    docs/commands.json (bool, string, int, int64, duration, or "repeat" for a
    flag given once per value) and the value (None or False: not given)."""

    name: str
    type: str
    value: Any


def flag_args(flags: Sequence[Flag]) -> List[str]:
    """The command-line words of flags, in the order given."""
    out: List[str] = []
    for f in flags:
        v = f.value
        if v is None or v is False:
            continue
        if f.type == "bool":
            if v is not True:
                raise TypeError(f"{f.name} is a switch: True or False, not {v!r}")
            out.append(f.name)
        elif f.type == "repeat":
            if isinstance(v, (str, bytes)):
                raise TypeError(f"{f.name} takes a list of values, not one string")
            for item in v:
                out += [f.name, str(item)]
        elif f.type == "duration":
            out += [f.name, go_duration(v)]
        elif f.type in ("int", "int64", "int32", "uint", "uint64"):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{f.name} takes an integer, not {v!r}")
            out += [f.name, str(v)]
        else:
            out += [f.name, str(v)]
    return out


def positional_args(values: Sequence[Tuple[Any, bool]]) -> List[str]:
    """``--`` and the positional values: (value, optional) pairs in the
    command's order, a list for a variadic argument. An optional value left
    out (None) must not be followed by another optional one that is given:
    avfs would read that one in its place."""
    out: List[str] = []
    gap = False
    for value, optional in values:
        if value is None:
            if not optional:
                raise TypeError("a required argument is None")
            gap = True
            continue
        if optional and gap:
            raise ValueError("an optional argument is given after one left out")
        out += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return ["--", *out] if out else []


def command_args(path: Sequence[str], values: Sequence[Tuple[Any, bool]], flags: Sequence[Flag]) -> List[str]:
    """A whole command line after the global flags."""
    return [*path, *flag_args(flags), *positional_args(values)]


__all__ = ["Duration", "Flag", "go_duration", "flag_args", "positional_args", "command_args"]
