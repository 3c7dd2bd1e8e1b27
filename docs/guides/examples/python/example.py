"""An agent's workspace with avfs, driven from Python (docs/guides/python.md).

Run it with the agentvfs-cli package installed (a platform wheel carries
the avfs binary; otherwise set AGENTVFS_BIN):

    python example.py

It works in a throwaway avfs home and leaves nothing behind. Needs FUSE
(/dev/fuse, as root or with fuse3 installed) for the proxy runs.
"""

import tempfile
from pathlib import Path

from agentvfs import Avfs, AvfsError


def main(home: str) -> None:
    avfs = Avfs(home=home)
    print("avfs", avfs.version().version)

    # A repository on the host, imported into a vault that records it as
    # its origin (the generated stub of `avfs vault create --from`).
    repo = Path(home) / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    created = avfs.commands.vault_create("project", from_=str(repo))
    print("origin:", created.origin.host_dir, "checkpoint", created.origin.checkpoint)

    # One fork per task: O(1), whatever the project holds.
    fork = avfs.vault_fork("project", "task-001")
    task = Avfs(home=home, vault=fork.name)

    # Run the agent's command through the proxy and see what it changed.
    run = task.proxy_exec(shell="echo 'notes' > NOTES.md && ls src")
    assert run.success and run.state == "completed", run.result.error
    print("stdout:", run.stdout.strip())
    for change in run.changes:
        print(change.kind, change.path, change.size_after, "bytes")
    assert [c.path for c in run.changes] == ["/NOTES.md"]

    # A denied command is an answer, not an exception: nothing ran.
    denied = task.proxy_exec(["rm", "-rf", "/"])
    assert denied.state == "denied" and denied.exit_code is None
    print("denied:", denied.result.decision.reason)

    # A networked command waits for a person's approval, then runs once.
    pending = task.proxy_exec(["curl", "--version"])
    assert pending.state == "awaiting_approval"
    avfs.proxy_approve(pending.id)  # what a person does with `avfs proxy approve ID`
    approved = task.proxy_exec(approval=pending.id)
    print("approved run exited", approved.exit_code)

    # A timeout stops the command; the envelope says so.
    slow = task.proxy_exec(["sleep", "30"], timeout=500)
    assert slow.result.timed_out and not slow.success

    # What the task changed, compared with the project.
    diff = task.checkpoint_diff("vault:project", "vault:task-001")
    print("fork vs project:", [(c.kind, c.path) for c in diff.changes])

    # The work as a git patch (each text change's part of `avfs diff
    # --patch`), then written into the repository it came from.
    patch = task.diff("vault:project", "vault:task-001")
    print("".join(c.patch or "" for c in patch.changes), end="")
    applied = task.apply(str(repo))
    assert not applied.conflicts and (repo / "NOTES.md").read_text() == "notes\n"
    print("applied to", applied.host_dir, [(e.kind, e.path) for e in applied.applied])

    # Look at the workspace as a directory while it is mounted.
    mnt = Path(home) / "mnt"
    mnt.mkdir()
    with task.mounted(mnt) as m:
        print("mounted", m.vault, "at", m.mountpoint, ":", sorted(p.name for p in mnt.iterdir()))

    # Undo the run: the fork is back to the state just before it.
    undo = task.proxy_undo(run.id)
    print("undid", len(undo.undone), "runs")
    assert [e.name for e in task.ls("/").entries] == ["src"]

    # Errors are typed: branch on .error, show .hint to people.
    try:
        avfs.vault_delete("project")
    except AvfsError as err:
        assert err.error == "VaultHasForks" and err.exit_code == 9
        print("refused:", err.error, "-", err.hint)
    avfs.vault_delete("task-001")
    avfs.vault_delete("project")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="avfs-example-") as tmp:
        try:
            main(tmp)
        finally:
            # Leave no mount behind, even when main() stopped half-way.
            leftover = Avfs(home=tmp)
            for m in leftover.mounts().mounts:
                leftover.unmount(m.mountpoint, lazy=True)
    print("ok")
