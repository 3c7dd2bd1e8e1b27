"""The binary resolution order: $AGENTVFS_BIN, package data, cache, PATH.

Each location gets a symlink to the real binary, and the test checks both
which path is chosen and that it runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import agentvfs
from agentvfs import Avfs, BinaryNotFound, __main__ as cli
from agentvfs import _resolve


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Empty candidate places: no $AGENTVFS_BIN, a package-data path, a cache
    root and a PATH directory, none holding avfs yet."""
    monkeypatch.delenv("AGENTVFS_BIN", raising=False)
    pkg = tmp_path / "pkg" / "_bin" / "avfs"
    monkeypatch.setattr(_resolve, "package_binary", lambda: pkg)
    cache_root = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    path_dir = tmp_path / "path"
    path_dir.mkdir()
    monkeypatch.setenv("PATH", str(path_dir))
    return {
        "package": pkg,
        "cache": cache_root / "agentvfs" / agentvfs.__version__ / "avfs",
        "path": path_dir / "avfs",
        "env": tmp_path / "env" / "avfs",
    }


def put(link: Path, binary: str) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(binary)
    return link


def runs(binary: str) -> None:
    assert Avfs(bin=binary).version().json_contract_version >= 1


def test_agentvfs_bin_wins(places: dict, avfs_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("package", "cache", "path", "env"):
        put(places[key], avfs_bin)
    monkeypatch.setenv("AGENTVFS_BIN", str(places["env"]))
    assert agentvfs.resolve_binary() == str(places["env"])
    runs(agentvfs.resolve_binary())


def test_agentvfs_bin_unusable_is_an_error(places: dict, avfs_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A binary the user named explicitly is never silently replaced by another."""
    put(places["path"], avfs_bin)
    monkeypatch.setenv("AGENTVFS_BIN", str(places["env"]))
    with pytest.raises(BinaryNotFound) as exc:
        agentvfs.resolve_binary()
    assert exc.value.tried == [agentvfs.Attempt("$AGENTVFS_BIN", str(places["env"]), "does not exist")]
    places["env"].parent.mkdir(parents=True)
    places["env"].write_text("#!/bin/sh\n")
    places["env"].chmod(0o644)
    with pytest.raises(BinaryNotFound, match="is not executable"):
        agentvfs.resolve_binary()


def test_package_data_before_cache_and_path(places: dict, avfs_bin: str) -> None:
    for key in ("package", "cache", "path"):
        put(places[key], avfs_bin)
    assert agentvfs.resolve_binary() == str(places["package"])
    runs(agentvfs.resolve_binary())


def test_installed_platform_wheel_uses_its_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a platform wheel installed, its own _bin/avfs is what runs."""
    pkg = agentvfs.package_binary()
    if not pkg.exists():
        pytest.skip("agentvfs was not installed from a platform wheel")
    assert pkg == Path(agentvfs.__file__).resolve().parent / "_bin" / "avfs"
    assert os.access(pkg, os.X_OK), "the wheel must install _bin/avfs executable"
    monkeypatch.delenv("AGENTVFS_BIN", raising=False)
    assert agentvfs.resolve_binary() == str(pkg)
    runs(str(pkg))


def test_cache_before_path(places: dict, avfs_bin: str) -> None:
    put(places["cache"], avfs_bin)
    put(places["path"], avfs_bin)
    assert agentvfs.resolve_binary() == str(places["cache"])
    runs(agentvfs.resolve_binary())


def test_cache_ignores_relative_xdg_cache_home(
    places: dict, avfs_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    expected = tmp_path / "userhome" / ".cache" / "agentvfs" / agentvfs.__version__ / "avfs"
    assert agentvfs.cache_binary() == expected
    put(expected, avfs_bin)
    assert agentvfs.resolve_binary() == str(expected)


def test_path_last(places: dict, avfs_bin: str) -> None:
    put(places["path"], avfs_bin)
    assert agentvfs.resolve_binary() == str(places["path"])
    runs(agentvfs.resolve_binary())


def test_nothing_found_lists_what_was_tried(places: dict) -> None:
    with pytest.raises(BinaryNotFound) as exc:
        agentvfs.resolve_binary()
    err = exc.value
    assert issubclass(BinaryNotFound, FileNotFoundError)
    assert [a.source for a in err.tried] == ["$AGENTVFS_BIN", "package data", "cache", "PATH"]
    assert err.tried[1].location == str(places["package"])
    assert err.tried[2].location == str(places["cache"])
    assert err.tried[3].location == str(places["path"].parent)
    for attempt in err.tried:
        assert attempt.location in str(err) and attempt.reason in str(err)
    with pytest.raises(BinaryNotFound):
        Avfs()


def test_explicit_bin_overrides_everything(places: dict, avfs_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTVFS_BIN", str(places["env"]))  # unusable, but not consulted
    assert Avfs(bin=avfs_bin).bin == avfs_bin
    put(places["path"], avfs_bin)
    assert Avfs(bin="avfs").bin == str(places["path"])  # a bare name is looked up on PATH
    with pytest.raises(BinaryNotFound, match="bin argument"):
        Avfs(bin=places["env"])


def test_cli_reports_nothing_found(places: dict, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["version", "--json"]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["error"] == "BinaryNotFound" and doc["exit_code"] == 1
    assert [t["source"] for t in doc["tried"]] == ["$AGENTVFS_BIN", "package data", "cache", "PATH"]
    assert "no usable avfs binary" in err
    # --json after -- belongs to the proxied command: no document then.
    assert cli.main(["proxy", "exec", "--", "echo", "--json"]) == 1
    assert capsys.readouterr().out == ""
