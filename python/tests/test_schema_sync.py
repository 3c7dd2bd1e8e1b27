"""The dataclasses stay in step with docs/schema/*.json.

For every schema the client parses (agentvfs.models.SCHEMAS), the walk
follows $ref, arrays and nullable alternatives down every nested object,
and at each level requires:

- each schema property to be a field of the dataclass, and each field to be
  a schema property (a typo or a field avfs dropped shows up);
- a property the schema requires to be a field without a default, and an
  optional one to have a default (None), so parsing never fails on an
  optional field and never hides a missing required one;
- a property that is an object (or a list of objects) to be parsed into a
  nested dataclass (``nested``), not left as a dict.

A new schema file must either be parsed or be listed in NOT_PARSED.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from agentvfs import AvfsError
from agentvfs.models import ERROR_KINDS, RUN_STATES, SCHEMAS, Document, VersionInfo, json_key

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"

# The shared definitions, and documents that are no one class: error.json is
# checked against AvfsError below, proxy-exec-stream.json's lines are read by
# Avfs.proxy_stream.
NOT_PARSED = {"common.json", "error.json", "proxy-exec-stream.json"}

Node = Tuple[Dict[str, Any], str]  # a schema node and the file its local $refs resolve in


@lru_cache(maxsize=None)
def load(name: str) -> Dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text())


def deref(node: Dict[str, Any], file: str) -> Node:
    while "$ref" in node:
        target, _, pointer = node["$ref"].partition("#")
        file = target or file
        node = load(file)
        for part in [p for p in pointer.split("/") if p]:
            node = node[part]
    return node, file


def object_schema(node: Dict[str, Any], file: str) -> Optional[Node]:
    """The object schema (with properties) a property holds, looking through
    $ref, arrays and oneOf/anyOf alternatives such as null; None for scalars."""
    node, file = deref(node, file)
    if "properties" in node:
        return node, file
    if "items" in node:
        return object_schema(node["items"], file)
    for key in ("oneOf", "anyOf"):
        for alt in node.get(key, []):
            found = object_schema(alt, file)
            if found:
                return found
    return None


def problems(cls: type, node: Dict[str, Any], file: str, where: str, seen: Tuple[int, ...] = ()) -> List[str]:
    out: List[str] = []
    if id(node) in seen:
        return out  # a recursive schema (a tree node holds tree nodes): checked once
    seen += (id(node),)
    props = node["properties"]
    required = set(node.get("required", []))
    by_key = {json_key(f.name): f for f in fields(cls)}
    nested = getattr(cls, "nested", {})
    for key in props:
        if key not in by_key:
            out.append(f"{where}.{key}: in the schema, no field in {cls.__name__}")
    for key, f in by_key.items():
        if key not in props:
            out.append(f"{where}.{key}: field of {cls.__name__}, not in the schema")
            continue
        has_default = f.default is not MISSING or f.default_factory is not MISSING  # type: ignore[misc]
        if key in required and has_default:
            out.append(f"{where}.{key}: required by the schema, but {cls.__name__}.{f.name} has a default")
        if key not in required and not has_default:
            out.append(f"{where}.{key}: optional in the schema, but {cls.__name__}.{f.name} has no default")
        sub = object_schema(props[key], file)
        if sub and f.name not in nested:
            out.append(f"{where}.{key}: an object in the schema, not parsed into a dataclass by {cls.__name__}")
        elif not sub and f.name in nested:
            out.append(f"{where}.{key}: {cls.__name__} parses it as {nested[f.name].__name__}, the schema has no object")
        elif sub:
            out += problems(nested[f.name], sub[0], sub[1], f"{where}.{key}", seen)
    return out


def check(name: str, cls: type) -> List[str]:
    top = object_schema(load(name), name)
    assert top is not None, f"{name} describes no object"
    return problems(cls, top[0], top[1], name)


SCHEMA_FILES = sorted(p.name for p in SCHEMA_DIR.glob("*.json"))


def test_schema_dir_found() -> None:
    assert len(SCHEMA_FILES) > 20, f"no schemas in {SCHEMA_DIR}"


@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_schema_matches_dataclass(name: str) -> None:
    if name in NOT_PARSED:
        assert name not in SCHEMAS
        return
    assert name in SCHEMAS, f"new schema {name}: add a dataclass to agentvfs.models.SCHEMAS or list it in NOT_PARSED"
    found = check(name, SCHEMAS[name])
    assert not found, "\n".join(found)


def test_every_parsed_schema_exists() -> None:
    assert set(SCHEMAS) <= set(SCHEMA_FILES)
    assert all(issubclass(cls, Document) for cls in SCHEMAS.values())


def test_error_schema_matches_avfs_error() -> None:
    """AvfsError exposes every field error.json requires, plus hint."""
    node = load("error.json")
    doc = {"error": "NotFound", "message": "m", "exit_code": 3}
    err = AvfsError(doc)
    for key in list(node["required"]) + ["hint"]:
        assert key in node["properties"]
        assert hasattr(err, key), f"AvfsError lacks .{key}"
    assert set(node["required"]) == set(doc)


def test_the_check_catches_drift() -> None:
    """The walk is not vacuous: an added property or a lost one is caught."""
    schema = json.loads(json.dumps(load("version.json")))
    schema["properties"]["added_later"] = {"type": "string"}
    del schema["properties"]["os"]
    found = problems(VersionInfo, schema, "version.json", "version.json")
    assert any("added_later" in p and "no field" in p for p in found)
    assert any(".os:" in p and "not in the schema" in p for p in found)


def test_run_states_match_schema() -> None:
    exec_states = load("proxy-exec.json")["properties"]["result"]["properties"]["state"]["enum"]
    history_states = load("proxy-history.json")["properties"]["runs"]["items"]["properties"]["state"]["enum"]
    assert list(RUN_STATES) == exec_states == history_states


def test_error_kinds_match_schema() -> None:
    assert list(ERROR_KINDS) == load("error.json")["properties"]["error"]["enum"]
    assert "VaultNotFound" in ERROR_KINDS
