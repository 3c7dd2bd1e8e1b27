"""The generated stubs (Avfs.commands): command lines built flags first, then
``--`` and the positional values, and typed results, against the real binary."""

from __future__ import annotations

import pytest

from agentvfs import ERROR_KINDS, Avfs, AvfsError, ProxyExecResult, Vault
from agentvfs._args import Flag, command_args
from agentvfs.models import TreeResult


def test_flags_then_dashdash_then_values() -> None:
    assert command_args(["write"], [("/f", False), ("--json", True)], [Flag("--append", "bool", True)]) == [
        "write", "--append", "--", "/f", "--json"]
    assert command_args(["vault", "list"], [], []) == ["vault", "list"]
    assert command_args(
        ["proxy", "exec"], [(["ls", "-l"], True)],
        [Flag("--env", "repeat", ["A=1", "B=2"]), Flag("--timeout", "duration", 250),
         Flag("--max-output", "int64", 10), Flag("--cwd", "string", None)],
    ) == ["proxy", "exec", "--env", "A=1", "--env", "B=2", "--timeout", "250000us", "--max-output", "10",
          "--", "ls", "-l"]


def test_gaps_and_bad_values_are_refused() -> None:
    with pytest.raises(ValueError):
        command_args(["diff"], [(None, True), ("x", True)], [])
    assert command_args(["mount"], [(None, True), ("/mp", False)], []) == ["mount", "--", "/mp"]
    with pytest.raises(TypeError):
        command_args(["tree"], [], [Flag("--level", "int", 1.5)])
    with pytest.raises(TypeError):
        command_args(["proxy", "exec"], [], [Flag("--env", "repeat", "A=1")])


def test_stubs_against_avfs(avfs: Avfs) -> None:
    c = avfs.commands
    v = c.vault_create("stubs")
    assert isinstance(v, Vault) and v.name == "stubs"
    c.write("/f", "--help", vault="stubs")
    assert c.cat("/f", vault="stubs").text == "--help"
    c.mkdir("/a/b", parents=True, vault="stubs")
    tree = c.tree("/", level=1, vault="stubs")
    assert isinstance(tree, TreeResult)
    run = c.proxy_exec(["sh", "-c", "echo $X"], env=["X=from-env"], timeout="10s", linger=0, vault="stubs")
    assert isinstance(run, ProxyExecResult)
    assert (run.state, run.stdout, run.request.timeout_ms) == ("completed", "from-env\n", 10000)
    with pytest.raises(AvfsError) as e:
        c.checkpoint_info("nope", vault="stubs")
    assert e.value.error == "CheckpointNotFound" and e.value.error in ERROR_KINDS
