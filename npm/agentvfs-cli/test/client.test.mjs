// The typed client against the real avfs binary, in a throwaway home. Every
// document it returns is also checked strictly against docs/schema.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Avfs, AvfsError, AvfsProcessError, BinaryNotFoundError } from "../dist/index.js";
import { avfsBin, removeHome, schemaErrors, tempDir } from "./helpers.mjs";

let home, avfs;
before(() => {
  home = tempDir("agentvfs-cli-home-");
  avfs = new Avfs({ bin: avfsBin(), home });
});
after(() => removeHome(home));

/** Returns doc after checking it against docs/schema/FILE. */
function valid(file, doc) {
  assert.deepEqual(schemaErrors(file, doc), [], `${file}: ${JSON.stringify(doc)}`);
  return doc;
}

test("version", async () => {
  const v = valid("version.json", await avfs.version());
  assert.equal(v.json_contract_version, 1);
  assert.ok(v.backends.includes(v.default_backend));
});

test("create → fork → checkpoint → proxy exec in the fork → restore", async () => {
  const base = valid("vault-info.json", await avfs.vault.create("base"));
  assert.equal(base.name, "base");
  assert.equal(base.parent, null);
  valid("write.json", await avfs.write("/README", "base file\n", { vault: "base" }));

  const fork = valid("vault-fork.json", await avfs.vault.fork("base", "task"));
  assert.equal(fork.source, "base");
  const task = new Avfs({ bin: avfsBin(), home, vault: "task" });
  assert.equal(valid("vault-info.json", await task.vault.info()).parent, "base");

  const saved = valid("checkpoint-save.json", await task.checkpoint.save("before", { message: "clean fork" }));
  assert.equal(saved.message, "clean fork");

  const run = valid("proxy-exec.json", await task.proxy.shell("echo hi > f.txt"));
  assert.equal(run.kind, "proxy_exec_result");
  assert.equal(run.success, true);
  assert.equal(run.request.command_mode, "shell");
  assert.equal(run.result.state, "completed");
  assert.equal(run.result.exit_code, 0);
  assert.equal(run.result.decision.action, "allow_with_checkpoint");
  assert.ok(run.result.checkpoint?.kept);
  assert.deepEqual(run.result.changes.map((c) => [c.path, c.kind, c.size_after]), [["/f.txt", "added", 3]]);
  assert.equal(valid("cat.json", await task.cat("/f.txt")).content, "hi\n");

  const diff = valid("diff.json", await task.checkpoint.diff("before"));
  assert.equal(diff.to, "vault:task");
  assert.deepEqual(diff.changes.map((c) => c.path), ["/f.txt"]);
  assert.equal(diff.summary.added, 1);
  const patch = valid("content-diff.json", await task.diff("before"));
  assert.match(patch.changes[0].patch ?? "", /^diff --git a\/f.txt b\/f.txt\nnew file mode 100644\n/);
  assert.equal((await task.cat("/f.txt", { at: `run:${run.id}^after` })).content, "hi\n");

  const merge = valid("vault-merge.json", await avfs.vault.merge("task", { dryRun: true }));
  assert.deepEqual(merge.applied, [{ path: "/f.txt", kind: "added" }]);
  assert.equal(merge.target, "base");
  const list = valid("checkpoint-list.json", await task.checkpoint.list());
  assert.deepEqual(list.checkpoints.map((c) => c.name), ["before", run.result.checkpoint.name]);

  valid("checkpoint-restore.json", await task.checkpoint.restore("before"));
  assert.deepEqual(valid("ls.json", await task.ls()).entries.map((e) => e.name), ["README"]);
  assert.deepEqual((await avfs.ls("/", { vault: "base" })).entries.map((e) => e.name), ["README"]);

  const vaults = valid("vault-list.json", await avfs.vault.list());
  assert.deepEqual(vaults.vaults.map((v) => [v.name, v.parent]), [["base", null], ["task", "base"]]);
  valid("checkpoint-delete.json", await task.checkpoint.delete(run.result.checkpoint.name));
});

test("an error document becomes an AvfsError", async () => {
  await avfs.vault.create("parent");
  await avfs.vault.fork("parent", "child");
  const err = await avfs.vault.delete("parent").then(() => assert.fail("deleted a vault with forks"), (e) => e);
  assert.ok(err instanceof AvfsError);
  valid("error.json", err.document);
  assert.equal(err.error, "VaultHasForks");
  assert.equal(err.exitCode, 9);
  assert.equal(err.hint, "delete the forks first");
  assert.deepEqual(err.document.forks, ["child"]);

  await assert.rejects(avfs.vault.info("nope"), { name: "AvfsError", error: "VaultNotFound", exitCode: 3 });
  await assert.rejects(avfs.cat("/missing", { vault: "parent" }), { error: "NotFound", exitCode: 3 });
  await assert.rejects(avfs.checkpoint.restore("nope", { vault: "parent" }), { error: "CheckpointNotFound" });
  await assert.rejects(avfs.vault.create("bad name"), { error: "InvalidInput", exitCode: 5 });

  valid("vault-delete.json", await avfs.vault.delete("child"));
  assert.equal((await avfs.vault.delete("parent")).deleted, true);
});

test("proxy exec returns the envelope when denied, awaiting approval or timed out", async () => {
  await avfs.vault.create("gate");
  const o = { vault: "gate" };

  const denied = valid("proxy-exec.json", await avfs.proxy.exec(["cat", "/etc/passwd"], o));
  assert.equal(denied.result.state, "denied");
  assert.equal(denied.success, false);
  assert.equal(denied.result.exit_code, null);
  assert.ok(denied.result.decision.categories.includes("host_escape_risk"));

  const pending = valid("proxy-exec.json", await avfs.proxy.exec(["curl", "--version"], o));
  assert.equal(pending.result.state, "awaiting_approval");
  assert.equal(pending.result.approval?.status, "pending");

  const slow = valid("proxy-exec.json", await avfs.proxy.shell("sleep 10", { ...o, timeout: 200, grace: 100 }));
  assert.equal(slow.result.state, "timed_out");
  assert.equal(slow.result.timed_out, true);
  assert.equal(slow.result.signal, "SIGTERM");
  assert.equal(slow.request.timeout_ms, 200);

  const missing = valid("proxy-exec.json", await avfs.proxy.exec(["no-such-program-xyz"], o));
  assert.equal(missing.result.exit_code, 127);

  const failing = await avfs.proxy.shell("exit 3", o);
  assert.equal(failing.result.exit_code, 3);
  assert.equal(failing.success, false);
});

test("approval: approve runs the request once, reject refuses it", async () => {
  await avfs.vault.create("net");
  const o = { vault: "net" };
  const pending = await avfs.proxy.exec(["curl", "--version"], o);
  const approved = valid("proxy-approval.json", await avfs.proxy.approve(pending.id));
  assert.equal(approved.approval.status, "approved");

  const ran = valid("proxy-exec.json", await avfs.proxy.exec([], { ...o, approval: pending.id }));
  assert.equal(ran.result.state, "completed");
  assert.equal(ran.request.approval, pending.id);
  assert.deepEqual(ran.result.command, ["curl", "--version"]);
  await assert.rejects(avfs.proxy.exec([], { ...o, approval: pending.id }), { error: "ApprovalUsed", exitCode: 15 });

  const other = await avfs.proxy.exec(["wget", "example.invalid"], o);
  assert.equal(valid("proxy-approval.json", await avfs.proxy.reject(other.id)).approval.status, "rejected");
  await assert.rejects(avfs.proxy.exec([], { ...o, approval: other.id }), { error: "ApprovalRejected", exitCode: 15 });
});

test("proxy exec options: env, cwd, stdin, readonly, checkpoint, maxOutput, changes", async () => {
  await avfs.vault.create("opts");
  await avfs.mkdir("/sub/dir", { vault: "opts", parents: true });
  const o = { vault: "opts" };

  const env = await avfs.proxy.exec(["printenv", "GREETING"], { ...o, env: { GREETING: "hello world" } });
  assert.equal(env.result.stdout, "hello world\n");
  assert.deepEqual(env.request.env_keys, ["GREETING"]);

  const cwd = await avfs.proxy.exec(["ls"], { ...o, cwd: "/sub" });
  assert.equal(cwd.result.cwd, "/sub");
  assert.equal(cwd.result.stdout, "dir\n");

  const stdin = await avfs.proxy.exec(["cat"], { ...o, stdin: Buffer.from("from stdin") });
  assert.equal(stdin.request.stdin, true);
  assert.equal(stdin.result.stdout, "from stdin");

  const ro = valid("proxy-exec.json", await avfs.proxy.shell("echo x > y", { ...o, readonly: true }));
  assert.equal(ro.request.readonly, true);
  assert.equal(ro.result.checkpoint, null);
  assert.notEqual(ro.result.exit_code, 0);

  const never = await avfs.proxy.shell("echo x > y", { ...o, checkpoint: "never" });
  assert.equal(never.request.checkpoint_mode, "never");
  assert.equal(never.result.checkpoint?.kept, false);

  const big = await avfs.proxy.shell("head -c 5000 /dev/zero", { ...o, maxOutput: 100 });
  assert.equal(big.result.stdout.length, 100);
  assert.equal(big.result.stdout_truncated, true);
  assert.equal(big.result.stdout_bytes, 5000);

  const summary = valid("proxy-exec.json", await avfs.proxy.shell("echo abc > s1; echo d > s2", { ...o, changes: "summary" }));
  assert.equal(summary.request.changes, "summary");
  assert.deepEqual(summary.result.changes, []);
  assert.deepEqual(summary.result.summary, { added: 2, modified: 0, deleted: 0, renamed: 0, bytes_added: 6, bytes_removed: 0 });
  const none = valid("proxy-exec.json", await avfs.proxy.shell("rm s1", { ...o, changes: "none" }));
  assert.equal(none.result.summary, null);
});

test("a second run on a busy vault is an AvfsError (VaultLocked), not an envelope", async () => {
  await avfs.vault.create("busy");
  const slow = avfs.proxy.exec(["sleep", "2"], { vault: "busy" });
  try {
    // The run holds the vault once its mount is up.
    for (let i = 0; i < 100 && (await avfs.mounts()).mounts.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    await assert.rejects(avfs.proxy.exec(["true"], { vault: "busy" }), { error: "VaultLocked", exitCode: 6 });
  } finally {
    assert.equal((await slow).result.state, "completed");
  }
});

test("keepMount leaves a mount that mounts() lists until unmount", async () => {
  await avfs.vault.create("kept");
  const run = await avfs.proxy.shell("echo kept > k.txt", { vault: "kept", keepMount: true });
  const mp = run.result.mountpoint;
  try {
    assert.equal(run.request.keep_mount, true);
    assert.equal(readFileSync(join(mp, "k.txt"), "utf8"), "kept\n");
    const live = valid("mounts.json", await avfs.mounts());
    assert.deepEqual(live.mounts.map((m) => [m.vault, m.mountpoint, m.live]), [["kept", mp, true]]);
    const reused = await avfs.proxy.exec(["cat", "k.txt"], { vault: "kept" });
    assert.equal(reused.result.mount_reused, true);
  } finally {
    valid("unmount.json", await avfs.unmount(mp));
  }
  assert.deepEqual((await avfs.mounts()).mounts, []);
});

test("mount and unmount", async () => {
  await avfs.vault.create("m");
  await avfs.write("/hello.txt", "through FUSE", { vault: "m" });
  const mp = join(home, "mnt");
  mkdirSync(mp);
  const mounted = valid("mount.json", await avfs.mount(mp, { vault: "m", readonly: true }));
  try {
    assert.equal(mounted.readonly, true);
    assert.equal(readFileSync(join(mp, "hello.txt"), "utf8"), "through FUSE");
  } finally {
    const un = valid("unmount.json", await avfs.unmount(mp));
    assert.equal(un.lazy, false);
  }
});

test("files: write, cat, readFile, ls, stat, mkdir, rm", async () => {
  const files = new Avfs({ bin: avfsBin(), home, vault: "files" });
  await files.vault.create("files");
  const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe]);
  assert.equal(valid("write.json", await files.write("/bin.dat", bytes)).size, 5);
  assert.equal(valid("cat.json", await files.cat("/bin.dat")).encoding, "base64");
  assert.deepEqual(await files.readFile("/bin.dat"), bytes);
  await files.write("/t.txt", "a");
  assert.equal((await files.write("/t.txt", "b", { append: true })).appended, true);
  assert.equal((await files.readFile("/t.txt")).toString(), "ab");
  assert.equal(valid("mkdir.json", await files.mkdir("/d/e", { parents: true })).created, true);
  await files.write("/.hidden", "");
  assert.deepEqual((await files.ls()).entries.map((e) => e.name), ["bin.dat", "d", "t.txt"]);
  assert.ok((await files.ls("/", { all: true })).entries.some((e) => e.name === ".hidden"));
  const st = valid("stat.json", await files.stat("/t.txt"));
  assert.deepEqual([st.type, st.size, st.mode], ["file", 2, "0644"]);
  await assert.rejects(files.rm("/d"), { error: "NotAFile" });
  assert.equal(valid("rm.json", await files.rm("/d", { recursive: true })).removed, 2);
  assert.equal((await files.rm("/gone", { force: true })).existed, false);
  // A name that looks like a flag is still a path.
  assert.equal((await files.write("/-n", "dash")).path, "/-n");
});

test("proxy history, show and undo", async () => {
  const v = new Avfs({ bin: avfsBin(), home, vault: "hist" });
  await v.vault.create("hist");
  const first = await v.proxy.shell("echo 1 > one");
  const second = await v.proxy.shell("echo 2 > two");
  const history = valid("proxy-history.json", await v.proxy.history());
  assert.deepEqual(history.runs.map((r) => r.id), [first.id, second.id]);
  assert.equal((await v.proxy.history({ limit: 1 })).runs.length, 1);
  assert.deepEqual(valid("proxy-exec.json", await v.proxy.show(first.id)), first);
  const undo = valid("proxy-undo.json", await v.proxy.undo(first.id));
  assert.deepEqual(undo.undone.sort(), [first.id, second.id].sort());
  assert.deepEqual((await v.ls()).entries, []);
  assert.match((await v.proxy.show(second.id)).result.undone_by ?? "", new RegExp(first.id));
  const redo = valid("proxy-redo.json", await v.proxy.redo());
  assert.equal(redo.run, first.id);
  assert.deepEqual((await v.ls()).entries.map((e) => e.name), ["one"]);
});

test("policy check and show", async () => {
  await avfs.vault.create("pol");
  const net = valid("policy-check.json", await avfs.policy.check(["curl", "https://example.com"], { vault: "pol" }));
  assert.equal(net.decision.action, "require_approval");
  assert.deepEqual(net.request.argv, ["curl", "https://example.com"]);
  const sh = valid("policy-check.json", await avfs.policy.checkShell("ls | grep x", { vault: "pol", cwd: "/" }));
  assert.equal(sh.decision.action, "allow");
  assert.equal(sh.decision.commands.length, 2);
  const show = valid("policy-show.json", await avfs.policy.show({ vault: "pol" }));
  assert.equal(show.categories.networked, "require_approval");
});

test("vault use makes the current vault", async () => {
  await avfs.vault.create("cur");
  const used = valid("vault-info.json", await avfs.vault.use("cur"));
  assert.equal(used.current, true);
  assert.equal((await avfs.vault.list()).current, "cur");
  assert.equal((await avfs.vault.info()).name, "cur");
});

test("no binary found: the call rejects with BinaryNotFoundError", async () => {
  const nowhere = new Avfs({ home, env: { AGENTVFS_BIN: join(home, "no-such-avfs") } });
  const call = nowhere.version();
  assert.ok(call instanceof Promise);
  await assert.rejects(call, (e) => e instanceof BinaryNotFoundError && e.tried.length === 1);
});

test("AvfsProcessError when avfs cannot run or prints no document", async () => {
  const missing = new Avfs({ bin: join(home, "no-such-avfs"), home });
  await assert.rejects(missing.version(), (e) => e instanceof AvfsProcessError && /cannot run/.test(e.message));
  const notJson = new Avfs({ bin: "/bin/echo", home });
  await assert.rejects(notJson.version(), (e) => e instanceof AvfsProcessError && /without printing a JSON document/.test(e.message));
});

test("user values that look like flags are values", async () => {
  await avfs.vault.create("dash");
  const o = { vault: "dash" };
  await avfs.mkdir("-d", o);
  valid("write.json", await avfs.write("-d/-n.txt", "dash", o));
  assert.equal((await avfs.readFile("-d/-n.txt", o)).toString(), "dash");
  assert.deepEqual((await avfs.ls("-d", o)).entries.map((e) => e.name), ["-n.txt"]);
  assert.equal((await avfs.rm("-d", { ...o, recursive: true })).removed, 2);
  // A name avfs does not allow is refused as a name, not parsed as a flag.
  await assert.rejects(avfs.vault.create("-x"), { error: "InvalidInput", exitCode: 5 });
  await assert.rejects(avfs.checkpoint.save("--help", o), { error: "InvalidInput", exitCode: 5 });
  await assert.rejects(avfs.proxy.show("-h"), { error: "NotFound", exitCode: 3 });
});

test("durations: numbers are milliseconds, strings are Go durations, nonsense rejects", async () => {
  await avfs.vault.create("dur");
  const o = { vault: "dur", checkpoint: "never" };
  const a = await avfs.proxy.exec(["true"], { ...o, timeout: 1500, grace: 0.5 });
  assert.equal(a.request.timeout_ms, 1500);
  assert.equal(a.request.grace_ms, 0.5);
  const b = await avfs.proxy.exec(["true"], { ...o, timeout: "1m30s", grace: "250ms" });
  assert.equal(b.request.timeout_ms, 90000);
  assert.equal(b.request.grace_ms, 250);
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    await assert.rejects(avfs.proxy.exec(["true"], { ...o, timeout: bad }), RangeError);
  }
  await assert.rejects(avfs.proxy.exec(["true"], { ...o, timeout: "-5s" }), { error: "InvalidInput" });
  await assert.rejects(avfs.proxy.exec(["true"], { ...o, maxOutput: -5 }), { error: "InvalidInput", exitCode: 5 });
});

test("proxy.stream yields the output as it comes, then the result; an error is an AvfsError", async () => {
  await avfs.vault.create("live");
  const o = { vault: "live", linger: 0 };
  const seen = [];
  const started = Date.now();
  let firstAt;
  for await (const ev of avfs.proxy.streamShell("echo one; echo err >&2; sleep 1; echo two > two.txt; echo three", o)) {
    valid("proxy-exec-stream.json", ev);
    if (ev.event === "stdout" && firstAt === undefined) firstAt = Date.now() - started;
    seen.push(ev);
  }
  const end = Date.now() - started;
  const text = (name) => seen.filter((e) => e.event === name).map((e) => e.data).join("");
  assert.equal(text("stdout"), "one\nthree\n");
  assert.equal(text("stderr"), "err\n");
  const last = seen.at(-1);
  assert.equal(last.event, "result");
  assert.equal(last.envelope.result.state, "completed");
  assert.deepEqual(last.envelope.result.changes.map((c) => c.path), ["/two.txt"]);
  assert.ok(end - firstAt > 800, `the first output came ${end - firstAt} ms before the end, not as it was printed`);

  await assert.rejects(async () => {
    for await (const ev of avfs.proxy.stream(["true"], { vault: "no-such-vault" })) assert.fail(`an event: ${JSON.stringify(ev)}`);
  }, (e) => e instanceof AvfsError && e.error === "VaultNotFound" && e.exitCode === 3);
});
