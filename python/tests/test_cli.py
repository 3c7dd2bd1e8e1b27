"""``python -m agentvfs`` and the ``agentvfs`` console script are avfs:
argv, stdin, stdout and the exit code pass through unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

import agentvfs

CONSOLE_SCRIPT = Path(sys.executable).parent / "agentvfs"


@pytest.fixture(params=["python -m agentvfs", "agentvfs"])
def entry(request: pytest.FixtureRequest, avfs_bin: str, monkeypatch: pytest.MonkeyPatch) -> List[str]:
    if request.param == "agentvfs" and not CONSOLE_SCRIPT.exists():
        pytest.skip("the console script is not installed next to this Python")
    monkeypatch.setenv("AGENTVFS_BIN", avfs_bin)
    if request.param == "agentvfs":
        return [str(CONSOLE_SCRIPT)]
    env_path = os.environ.get("PYTHONPATH", "")
    src = str(Path(agentvfs.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", src + (os.pathsep + env_path if env_path else ""))
    return [sys.executable, "-m", "agentvfs"]


def test_version(entry: List[str]) -> None:
    proc = subprocess.run(entry + ["version", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["json_contract_version"] >= 1


def test_error_exit_code_and_document(entry: List[str], home: Path) -> None:
    proc = subprocess.run(entry + ["--home", str(home), "vault", "info", "nope", "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 3
    doc = json.loads(proc.stdout)
    assert doc["error"] == "VaultNotFound" and doc["exit_code"] == 3


def test_usage_error_exit_code(entry: List[str]) -> None:
    proc = subprocess.run(entry + ["no-such-command", "--json"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"] == "InvalidInput"


def test_stdin_and_stdout_pass_through(entry: List[str], home: Path, avfs: agentvfs.Avfs) -> None:
    avfs.vault_create("v")
    data = bytes(range(256)) * 4
    proc = subprocess.run(entry + ["--home", str(home), "--vault", "v", "write", "/blob"], input=data,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert avfs.cat("/blob", vault="v").data == data
    proc = subprocess.run(entry + ["--home", str(home), "--vault", "v", "cat", "/blob"], capture_output=True)
    assert proc.returncode == 0 and proc.stdout == data


def test_exec_replaces_the_python_process(entry: List[str], home: Path, avfs: agentvfs.Avfs, avfs_bin: str) -> None:
    """On POSIX the wrapper execs avfs: the process started is avfs itself,
    with no Python left in between to relay signals or output."""
    if not os.path.exists("/proc/self/exe"):
        pytest.skip("needs /proc")
    avfs.vault_create("v")
    # write without content reads stdin: avfs waits while stdin stays open.
    proc = subprocess.Popen(entry + ["--home", str(home), "--vault", "v", "write", "/x"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        exe = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            exe = os.path.realpath(f"/proc/{proc.pid}/exe")
            if exe == os.path.realpath(avfs_bin):
                break
            time.sleep(0.02)
        assert exe == os.path.realpath(avfs_bin)
    finally:
        out, err = proc.communicate(b"done", timeout=30)
    assert proc.returncode == 0, err
    assert avfs.cat("/x", vault="v").text == "done"
