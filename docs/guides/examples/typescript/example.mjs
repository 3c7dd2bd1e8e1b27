// The example of docs/guides/typescript.md, run as it is by npm/scripts/test.sh
// against the installed agentvfs-cli. Run it yourself with
//   npm install agentvfs-cli && node example.mjs
// It works in a throwaway avfs home and removes it at the end.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Avfs, AvfsError } from "agentvfs-cli";

const home = mkdtempSync(join(tmpdir(), "avfs-example-"));
const avfs = new Avfs({ home });

try {
  // A repository on the host, imported into a base vault that records it
  // as its origin (the generated stub of `avfs vault create --from`).
  const repo = join(home, "repo");
  mkdirSync(join(repo, "src"), { recursive: true });
  writeFileSync(join(repo, "src", "app.txt"), "version 1\n");
  const project = await avfs.commands.vaultCreate("project", { from: repo });
  console.log(`origin: ${project.origin?.host_dir} (checkpoint ${project.origin?.checkpoint})`);

  // One fork per task: the agent's changes never reach the base.
  await avfs.vault.fork("project", "task-1");
  const task = new Avfs({ home, vault: "task-1" });
  await task.checkpoint.save("start", { message: "before the agent" });

  // Run the agent's command through the proxy and read what it did.
  const run = await task.proxy.shell("echo hi > f.txt && cat src/app.txt");
  assert.equal(run.result.state, "completed");
  assert.equal(run.result.exit_code, 0);
  console.log(`stdout: ${run.result.stdout.trim()}`);
  for (const change of run.result.changes) console.log(`${change.kind} ${change.path}`);

  for await (const ev of task.proxy.streamShell("echo building; echo done > built.txt")) {
    if (ev.event === "stdout") process.stdout.write(`live: ${ev.data}`);
    if (ev.event === "result") console.log(`streamed run: ${ev.envelope.result.state}`);
  }

  // Denied, awaiting approval, timed out: still an envelope, never a throw.
  const fetch = await task.proxy.exec(["curl", "https://example.com"]);
  if (fetch.result.state === "awaiting_approval") {
    console.log(`needs approval: avfs proxy approve ${fetch.result.approval?.id}`);
  }
  const slow = await task.proxy.exec(["sleep", "10"], { timeout: 200 });
  assert.equal(slow.result.timed_out, true);

  // Several commands on one live mount: keep it, and always unmount it.
  const first = await task.proxy.shell("mkdir -p build", { keepMount: true });
  try {
    const build = await task.proxy.shell("cp src/app.txt build/app.txt");
    assert.equal(build.result.mount_reused, true);
  } finally {
    if (first.result.mountpoint) await avfs.unmount(first.result.mountpoint);
  }

  // Failures are typed: branch on the error type, not the message.
  try {
    await avfs.vault.delete("project");
  } catch (err) {
    if (!(err instanceof AvfsError) || err.error !== "VaultHasForks") throw err;
    console.log(`${err.error} (exit ${err.exitCode}): ${err.hint}; forks: ${err.document.forks}`);
  }

  // The work as a git patch, then written into the repository it came from.
  const patch = await task.diff("vault:project", "vault:task-1");
  process.stdout.write(patch.changes.map((c) => c.patch ?? "").join(""));
  const applied = await task.apply(repo);
  assert.deepEqual(applied.conflicts, []);
  assert.equal(readFileSync(join(repo, "f.txt"), "utf8"), "hi\n");
  console.log(`applied: ${applied.applied.map((e) => `${e.kind} ${e.path}`).join(", ")}`);

  // Review the task against its checkpoint, then throw the work away.
  const diff = await task.checkpoint.diff("start");
  console.log(`changed since start: ${diff.changes.map((c) => c.path).join(" ")}`);
  await task.checkpoint.restore("start");
  assert.deepEqual((await task.ls("/")).entries.map((e) => e.name), ["src"]);
} finally {
  // Leave nothing mounted behind, then remove the home.
  for (const mount of (await avfs.mounts()).mounts) await avfs.unmount(mount.mountpoint);
  rmSync(home, { recursive: true, force: true });
}
