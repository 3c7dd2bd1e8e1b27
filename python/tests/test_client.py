"""The client against the real binary, in real vaults of a temporary home."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest

from agentvfs import (
    Avfs,
    AvfsError,
    Change,
    Checkpoint,
    DiffEntry,
    Entry,
    Fork,
    ProxyExecResult,
    StreamOutput,
    Vault,
)


def test_version(avfs: Avfs) -> None:
    v = avfs.version()
    assert v.json_contract_version == 1
    assert v.default_backend in v.backends


def test_vaults(avfs: Avfs) -> None:
    base = avfs.vault_create("base", max_files=1000)
    assert isinstance(base, Vault)
    assert (base.name, base.parent, base.forks, base.quota.max_files) == ("base", None, [], 1000)
    assert base.usage.files == 0 and base.created_at.endswith("Z")

    fork = avfs.vault_fork("base", "task", use=True)
    assert isinstance(fork, Fork) and (fork.source, fork.name, fork.current) == ("base", "task", True)
    assert avfs.vault_info("base").forks == ["task"]
    assert avfs.vault_info().name == "task"  # the current vault

    listed = avfs.vault_list()
    assert listed.current == "task"
    assert {v.name: v.parent for v in listed.vaults} == {"base": None, "task": "base"}
    assert avfs.vault_use("base").current is True

    with pytest.raises(AvfsError) as exc:
        avfs.vault_delete("base")
    err = exc.value
    assert (err.error, err.exit_code, err.document["forks"]) == ("VaultHasForks", 9, ["task"])
    assert err.hint and err.message

    gone = avfs.vault_delete("task")
    assert gone.deleted and gone.name == "task"
    with pytest.raises(AvfsError) as exc:
        avfs.vault_info("task")
    assert (exc.value.error, exc.value.exit_code) == ("VaultNotFound", 3)
    with pytest.raises(AvfsError) as exc:
        avfs.vault_create("base")
    assert (exc.value.error, exc.value.exit_code) == ("VaultExists", 4)


def test_files(avfs: Avfs) -> None:
    avfs.vault_create("v")
    files = Avfs(home=avfs.home, bin=avfs.bin, vault="v")  # a client bound to one vault
    assert files.mkdir("/a/b", parents=True).created
    w = files.write("/a/b/t.txt", "héllo\n")
    assert (w.created, w.size, w.bytes_written) == (True, 7, 7)
    assert files.write("/a/b/t.txt", "more", append=True).appended
    cat = files.cat("/a/b/t.txt")
    assert (cat.encoding, cat.text) == ("utf-8", "héllo\nmore")

    binary = b"\x00\xff\xfe" * 100
    files.write("/a/bin", binary)
    cat = files.cat("/a/bin")
    assert cat.encoding == "base64" and cat.data == binary

    listing = files.ls("/a")
    assert [(e.name, e.type) for e in listing.entries] == [("b", "dir"), ("bin", "file")]
    assert all(isinstance(e, Entry) for e in listing.entries)
    st = files.stat("/a/b/t.txt")
    assert (st.type, st.size, st.mode, st.target) == ("file", 11, "0644", None)

    with pytest.raises(AvfsError) as exc:
        files.rm("/a")
    assert exc.value.error == "NotAFile"
    rm = files.rm("/a", recursive=True)
    assert rm.existed and rm.removed == 4
    assert not files.rm("/a", force=True).existed
    with pytest.raises(AvfsError) as exc:
        files.cat("/a/b/t.txt")
    assert (exc.value.error, exc.value.exit_code, exc.value.document["path"]) == ("NotFound", 3, "/a/b/t.txt")


def test_checkpoints(avfs: Avfs, tmp_path: Path) -> None:
    avfs.vault_create("v")
    avfs.write("/f", "one", vault="v")
    saved = avfs.checkpoint_save("c1", message="first", vault="v")
    assert (saved.name, saved.vault, saved.message, saved.files) == ("c1", "v", "first", 1)
    avfs.write("/f", "two!", vault="v")
    avfs.write("/g", "new", vault="v")

    diff = avfs.checkpoint_diff(vault="v")  # latest checkpoint -> working state
    assert (diff.from_, diff.to) == ("vault:v@c1", "vault:v")
    assert [(c.path, c.kind, c.size_before, c.size_after) for c in diff.changes] == [
        ("/f", "modified", 3, 4), ("/g", "added", 0, 3)]
    assert all(isinstance(c, DiffEntry) for c in diff.changes)
    assert (diff.summary.added, diff.summary.modified, diff.summary.deleted) == (1, 1, 0)
    assert diff.raw["from"] == "vault:v@c1"
    content = avfs.diff(vault="v")
    assert [(c.path, c.binary, c.insertions, c.deletions) for c in content.changes] == [
        ("/f", False, 1, 1), ("/g", False, 1, 0)]
    assert content.changes[1].patch.startswith("diff --git a/g b/g\nnew file mode 100644\n")
    assert avfs.cat("/f", at="c1", vault="v").text == "one"
    assert [e.name for e in avfs.ls(at="c1", vault="v").entries] == ["f"]

    info = avfs.checkpoint_info("c1", vault="v")
    assert isinstance(info, Checkpoint) and info.message == "first"
    assert [c.name for c in avfs.checkpoint_list(vault="v").checkpoints] == ["c1"]

    restored = avfs.checkpoint_restore("c1", vault="v")
    assert (restored.name, restored.vault) == ("c1", "v") and restored.duration_ms >= 0
    assert avfs.cat("/f", vault="v").text == "one"
    assert [e.name for e in avfs.ls(vault="v").entries] == ["f"]

    assert avfs.checkpoint_delete("c1", vault="v").deleted
    with pytest.raises(AvfsError) as exc:
        avfs.checkpoint_restore("c1", vault="v")
    assert (exc.value.error, exc.value.exit_code) == ("CheckpointNotFound", 3)
    # The home's first vault became its current one: a call naming none works on it.
    assert avfs.checkpoint_list().vault == "v"
    empty = Avfs(home=tmp_path / "empty", bin=avfs.bin)
    with pytest.raises(AvfsError) as exc:
        empty.checkpoint_list()  # no vault selected at all
    assert (exc.value.error, exc.value.exit_code) == ("NoActiveVault", 10)


def test_full_cycle(avfs: Avfs, fuse: None, tmp_path: Path) -> None:
    """create -> fork -> checkpoint -> proxy exec in the fork -> restore."""
    avfs.vault_create("base")
    avfs.write("/README", "base\n", vault="base")
    avfs.checkpoint_save("v1", vault="base")
    avfs.vault_fork("base", "task")
    task = Avfs(home=avfs.home, bin=avfs.bin, vault="task")
    before = task.checkpoint_save("before-agent")

    run = task.proxy_exec(shell="echo hi > f.txt")
    assert isinstance(run, ProxyExecResult)
    assert (run.schema_version, run.kind, run.success, run.state, run.exit_code) == (
        1, "proxy_exec_result", True, "completed", 0)
    assert run.request.command_mode == "shell" and run.request.command[-1] == "echo hi > f.txt"
    assert run.result.decision.action == "allow_with_checkpoint"
    assert run.result.decision.commands[0].program == "echo"
    assert run.result.checkpoint is not None and run.result.checkpoint.kept
    assert run.result.stage_ms.execute >= 0 and run.result.mountpoint
    assert run.changes == [Change(path="/f.txt", kind="added", type="file", from_=None, size_before=0, size_after=3)]
    assert task.cat("/f.txt").text == "hi\n"
    assert avfs.cat("/README", vault="task").text == "base\n"  # the fork sees its parent's files

    # The fork changed, the base did not.
    # (avfs wants a selected vault even when both states name theirs.)
    applied = avfs.apply(str(tmp_path), from_="vault:base", to="vault:task", dry_run=True, vault="task")
    assert (applied.dry_run, [a.path for a in applied.applied]) == (True, ["/f.txt"])
    merge = avfs.vault_merge("task", dry_run=True)
    assert (merge.target, merge.merged, merge.checkpoint) == ("base", False, None)
    assert [(a.path, a.kind) for a in merge.applied] == [("/f.txt", "added")]
    diff = avfs.checkpoint_diff("vault:base", "vault:task", vault="task")
    assert [(c.path, c.kind) for c in diff.changes] == [("/f.txt", "added")]
    with pytest.raises(AvfsError):
        avfs.cat("/f.txt", vault="base")

    # Back to the state before the agent ran.
    task.checkpoint_restore(before.name)
    assert [e.name for e in task.ls().entries] == ["README"]
    names = [c.name for c in task.checkpoint_list().checkpoints]
    assert names == ["before-agent", run.result.checkpoint.name]

    shown = task.proxy_show(run.id)
    assert shown.id == run.id and shown.changes == run.changes
    assert [r.id for r in task.proxy_history().runs] == [run.id]


def test_proxy_argv_options(avfs: Avfs, fuse: None) -> None:
    avfs.vault_create("v")
    avfs.mkdir("/work", vault="v")
    run = avfs.proxy_exec(["sh", "-c", 'printf "%s" "$GREETING" > out; pwd'], vault="v", cwd="/work",
                          env={"GREETING": "hello"}, timeout="60s", checkpoint="never")
    assert run.state == "completed", run.result.error
    assert run.request.env_keys == ["GREETING"] and run.request.command_mode == "argv"
    assert run.request.cwd == "/work" and run.request.timeout_ms == 60000
    assert run.stdout.strip().endswith("/work")
    assert run.result.checkpoint is not None and not run.result.checkpoint.kept
    assert avfs.cat("/work/out", vault="v").text == "hello"

    fed = avfs.proxy_exec(["cat"], vault="v", stdin="fed\n")
    assert fed.request.stdin and fed.stdout == "fed\n"

    ro = avfs.proxy_exec(["cat", "work/out"], vault="v", readonly=True)
    assert ro.success and ro.stdout == "hello" and ro.result.checkpoint is None and ro.request.readonly

    missing = avfs.proxy_exec(["no-such-program-here"], vault="v")
    assert (missing.state, missing.exit_code, missing.success) == ("completed", 127, False)


def test_proxy_stream(avfs: Avfs, fuse: None) -> None:
    """proxy_stream yields the output while the command runs, then the envelope."""
    avfs.vault_create("live")
    start = time.monotonic()
    first = None
    events = []
    for ev in avfs.proxy_stream(shell="echo one; printf '\\377\\n' >&2; sleep 1; echo two > two.txt", vault="live", linger=0):
        if isinstance(ev, StreamOutput) and first is None:
            first = time.monotonic()
        events.append(ev)
    end = time.monotonic()
    out = b"".join(e.data for e in events[:-1] if isinstance(e, StreamOutput) and e.stream == "stdout")
    err = b"".join(e.data for e in events[:-1] if isinstance(e, StreamOutput) and e.stream == "stderr")
    assert (out, err) == (b"one\n", b"\xff\n")
    last = events[-1]
    assert isinstance(last, ProxyExecResult) and last.state == "completed"
    assert [c.path for c in last.result.changes] == ["/two.txt"]
    assert first is not None and end - first > 0.8, "the output came at the end, not as it was printed"

    with pytest.raises(AvfsError) as exc:
        list(avfs.proxy_stream(["true"], vault="no-such-vault"))
    assert (exc.value.error, exc.value.exit_code) == ("VaultNotFound", 3)


def test_proxy_outcomes_are_envelopes(avfs: Avfs, fuse: None) -> None:
    """deny (exit 14), approval (15) and timeout (124) return the envelope."""
    avfs.vault_create("v")
    denied = avfs.proxy_exec(["rm", "-rf", "/"], vault="v")
    assert (denied.state, denied.success, denied.exit_code) == ("denied", False, None)
    assert denied.result.decision.action == "deny" and "host_escape_risk" in denied.result.decision.categories

    slow = avfs.proxy_exec(["sleep", "30"], vault="v", timeout=300, grace=datetime.timedelta(milliseconds=500))
    assert slow.state == "timed_out" and slow.result.timed_out and not slow.success and slow.result.signal == "SIGTERM"
    assert slow.request.timeout_ms == 300 and slow.request.grace_ms == 500

    pending = avfs.proxy_exec(["curl", "--version"], vault="v")
    assert pending.state == "awaiting_approval" and pending.exit_code is None
    approval = pending.result.approval
    assert approval is not None and (approval.id, approval.status) == (pending.id, "pending")

    approved = avfs.proxy_approve(pending.id)
    assert approved.approval.status == "approved" and approved.command == ["curl", "--version"]
    ran = avfs.proxy_exec(vault="v", approval=pending.id)
    assert ran.state == "completed" and ran.request.approval == pending.id
    assert ran.result.approval is not None and ran.result.approval.used_by == ran.id
    with pytest.raises(AvfsError) as exc:
        avfs.proxy_exec(vault="v", approval=pending.id)
    assert (exc.value.error, exc.value.exit_code) == ("ApprovalUsed", 15)

    other = avfs.proxy_exec(["wget", "x"], vault="v")
    assert avfs.proxy_reject(other.id).approval.status == "rejected"
    with pytest.raises(AvfsError) as exc:
        avfs.proxy_exec(["wget", "x"], vault="v", approval=other.id)
    assert exc.value.error == "ApprovalRejected"

    states = [r.state for r in avfs.proxy_history(vault="v").runs]
    assert states == ["denied", "timed_out", "awaiting_approval", "completed", "awaiting_approval"]
    assert len(avfs.proxy_history(vault="v", limit=2).runs) == 2


def test_proxy_undo_and_keep_mount(avfs: Avfs, tmp_path: Path, fuse: None) -> None:
    avfs.vault_create("v")
    first = avfs.proxy_exec(shell="echo 1 > one", vault="v", keep_mount=True)
    assert first.request.keep_mount
    mounts = avfs.mounts().mounts
    assert [(m.vault, m.live) for m in mounts] == [("v", True)]
    second = avfs.proxy_exec(shell="echo 2 > two", vault="v")
    assert second.result.mount_reused

    with pytest.raises(AvfsError) as exc:
        avfs.proxy_undo(vault="v")  # a read-write mount is still there
    assert exc.value.error == "VaultLocked"
    done = avfs.unmount(mounts[0].mountpoint)
    assert done.mountpoint == mounts[0].mountpoint and not done.lazy
    assert avfs.mounts().mounts == []

    undo = avfs.proxy_undo(first.id, vault="v")
    assert (undo.run, undo.undone) == (first.id, [first.id, second.id])
    assert avfs.ls(vault="v").entries == []
    assert avfs.proxy_show(first.id).result.undone_by is not None


def test_mounted(avfs: Avfs, tmp_path: Path, fuse: None) -> None:
    avfs.vault_create("v")
    avfs.write("/hello.txt", "from the vault", vault="v")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with avfs.mounted(mnt, vault="v") as m:
        assert (m.vault, m.readonly, m.pid > 0) == ("v", False, True)
        assert (mnt / "hello.txt").read_text() == "from the vault"
        (mnt / "made-here.txt").write_text("written through FUSE")
    assert avfs.mounts().mounts == []
    assert avfs.cat("/made-here.txt", vault="v").text == "written through FUSE"


def test_policy_check(avfs: Avfs) -> None:
    check = avfs.policy_check(["ls", "-la"])
    assert (check.kind, check.vault, check.decision.action) == ("policy_decision", None, "allow")
    assert check.request.argv == ["ls", "-la"] and check.request.shell is None
    script = avfs.policy_check(shell="curl x | sh", cwd="/")
    assert script.decision.action == "deny" and script.request.shell == "curl x | sh"
    assert [c.program for c in script.decision.commands] == ["curl", "sh"]


def test_argument_checks(avfs: Avfs) -> None:
    with pytest.raises(TypeError):
        avfs.proxy_exec("echo hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        avfs.proxy_exec(["true"], shell="true")
    with pytest.raises(ValueError):
        avfs.proxy_exec()
    with pytest.raises(ValueError):
        avfs.policy_check()


def test_values_that_look_like_flags(avfs: Avfs, tmp_path: Path) -> None:
    """User values are positional arguments after "--", never flags: a path
    such as "-n.txt" is a path, and a checkpoint named "--yes" is a name
    (which avfs then refuses as a name, with a typed error)."""
    avfs.vault_create("v", use=True)
    avfs.mkdir("-d")
    avfs.write("-d/-n.txt", "dash")
    assert avfs.cat("-d/-n.txt").text == "dash"
    assert [e.name for e in avfs.ls("-d").entries] == ["-n.txt"]
    assert avfs.stat("-d/-n.txt").size == 4
    assert avfs.rm("-d", recursive=True).removed == 2
    with pytest.raises(AvfsError) as err:
        avfs.checkpoint_save("-c")
    assert err.value.error == "InvalidInput" and "checkpoint name" in err.value.message
    with pytest.raises(AvfsError) as err:
        avfs.checkpoint_restore("--help")
    assert err.value.error in ("InvalidInput", "CheckpointNotFound")
    with pytest.raises(AvfsError) as err:
        avfs.vault_create("-x")
    assert err.value.error == "InvalidInput"
    with pytest.raises(AvfsError) as err:
        avfs.vault_info("--help")
    assert err.value.error == "InvalidInput"
    with pytest.raises(AvfsError) as err:
        avfs.proxy_show("-h")  # not the help text: a run id that does not exist
    assert err.value.error == "NotFound"
