"""Parsing rules that need no binary: added fields are tolerated, missing
required ones are reported, keywords are renamed, durations are Go's."""

from __future__ import annotations

import datetime

import pytest

from agentvfs import AvfsError, Diff, ProtocolError, VaultSummary, VersionInfo
from agentvfs.client import go_duration

VERSION = {
    "version": "1.2.3", "go_version": "go1.26", "os": "linux", "arch": "amd64",
    "format_version": 1, "json_contract_version": 1, "backends": ["sqlite"], "default_backend": "sqlite",
}


def test_added_fields_are_tolerated_and_kept() -> None:
    v = VersionInfo.from_dict(dict(VERSION, some_future_field={"x": 1}))
    assert v.version == "1.2.3"
    assert v.raw["some_future_field"] == {"x": 1}
    assert not hasattr(v, "some_future_field")


def test_missing_required_field() -> None:
    doc = dict(VERSION)
    del doc["backends"]
    with pytest.raises(ProtocolError, match="backends"):
        VersionInfo.from_dict(doc)


def test_optional_fields_default_to_none() -> None:
    s = VaultSummary.from_dict({"name": "x", "backend": "sqlite", "path": "/p", "current": False, "parent": None,
                                "error": "CorruptVault", "message": "bad"})
    assert (s.error, s.vault_id, s.created_at) == ("CorruptVault", None, None)


def test_keyword_keys_and_nested_lists() -> None:
    d = Diff.from_dict({
        "from": "vault:a", "to": "vault:b",
        "changes": [{"path": "/x", "kind": "added", "type": "file", "size_before": 0, "size_after": 1, "new": 1}],
        "summary": {"added": 1, "modified": 0, "deleted": 0, "type_changed": 0, "mode_changed": 0},
    })
    assert d.from_ == "vault:a" and d.changes[0].path == "/x" and d.summary.added == 1


def test_not_an_object() -> None:
    with pytest.raises(ProtocolError):
        VersionInfo.from_dict(["not", "an", "object"])


def test_avfs_error_fields() -> None:
    doc = {"error": "VaultLocked", "message": "busy", "exit_code": 6, "hint": "unmount it", "op": "mount"}
    err = AvfsError(doc, ["avfs"], "", 6)
    assert (err.error, err.message, err.exit_code, err.hint, err.document["op"]) == (
        "VaultLocked", "busy", 6, "unmount it", "mount")
    assert "VaultLocked" in str(err) and "unmount it" in str(err)


@pytest.mark.parametrize("value,expected", [
    (0, "0us"), (1, "1000us"), (0.25, "250us"), (1500, "1500000us"),
    (datetime.timedelta(minutes=5), "300000000us"), ("5m", "5m"), ("250ms", "250ms"), ("1.5s", "1.5s"),
    # a string that is a bare number is milliseconds too, as in the TypeScript client
    ("0", "0us"), ("200", "200000us"), ("2.5", "2500us"),
])
def test_go_duration(value: object, expected: str) -> None:
    assert go_duration(value) == expected  # type: ignore[arg-type]


def test_go_duration_rejects() -> None:
    with pytest.raises(ValueError):
        go_duration(-1)
    with pytest.raises(ValueError):
        go_duration(float("nan"))
    with pytest.raises(ValueError):
        go_duration(float("inf"))
    with pytest.raises(TypeError):
        go_duration(True)
