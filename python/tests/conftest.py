"""Fixtures: the real avfs binary, and an avfs home per test that is left
with no mount behind it.

The tests exercise whichever ``agentvfs`` is importable: the installed one
when scripts/test.sh runs them in its venv (so the package as shipped is
what gets tested), else the sources in ../src for a quick run from the tree.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

try:
    import agentvfs
except ImportError:  # not installed: test the sources
    sys.path.insert(0, str(HERE.parent / "src"))
    import agentvfs


def find_binary() -> str:
    """The avfs binary the tests drive: the package's own choice, else
    $AVFS_BIN_PATH (the binary scripts/test.sh was given)."""
    try:
        return agentvfs.resolve_binary()
    except agentvfs.BinaryNotFound:
        env = os.environ.get("AVFS_BIN_PATH")
        if env:
            return env
        raise


def pytest_report_header(config: pytest.Config) -> list:
    try:
        binary = find_binary()
    except agentvfs.BinaryNotFound:
        binary = "none found"
    return [f"agentvfs {agentvfs.__version__} from {Path(agentvfs.__file__).parent}", f"avfs binary: {binary}"]


@pytest.fixture(scope="session")
def avfs_bin() -> str:
    try:
        return find_binary()
    except agentvfs.BinaryNotFound as exc:
        pytest.fail(f"{exc}\n(or set AVFS_BIN_PATH; python/scripts/test.sh does)")


@pytest.fixture
def home(tmp_path: Path, avfs_bin: str) -> Iterator[Path]:
    """A fresh avfs home. Whatever the test did, every mount of it is
    unmounted afterwards (lazily if busy), so no FUSE mount or serving
    process outlives the test."""
    h = tmp_path / "home"
    h.mkdir()
    yield h
    client = agentvfs.Avfs(home=h, bin=avfs_bin)
    for m in client.mounts().mounts:
        try:
            client.unmount(m.mountpoint)
        except agentvfs.AvfsError:
            client.unmount(m.mountpoint, lazy=True)


@pytest.fixture
def avfs(home: Path, avfs_bin: str) -> agentvfs.Avfs:
    return agentvfs.Avfs(home=home, bin=avfs_bin)


@pytest.fixture
def fuse() -> None:
    """Skip a test that mounts when this machine has no FUSE."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse on this machine")
