// The bin launcher: where it looks for avfs, in which order, what it says
// when it finds nothing, and that argv, stdio, exit codes and signals pass
// through. Each test lays out a node_modules tree in a temp dir with a copy
// of this package and, when wanted, a fake platform package.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { PLATFORMS, platformPackage } from "../dist/index.js";
import { avfsBin, packageDir, tempDir } from "./helpers.mjs";

const dirs = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const platformPkg = platformPackage();

/** A project with agentvfs-cli installed (and the platform package, if given a binary). */
function project({ platformBinary } = {}) {
  const root = tempDir("agentvfs-cli-launcher-");
  dirs.push(root);
  const pkg = join(root, "node_modules", "agentvfs-cli");
  for (const part of ["package.json", "bin", "dist"]) cpSync(join(packageDir, part), join(pkg, part), { recursive: true });
  if (platformBinary) {
    const dir = join(root, "node_modules", platformPkg);
    mkdirSync(join(dir, "bin"), { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: platformPkg, version: "0.0.0" }));
    cpSync(platformBinary, join(dir, "bin", "avfs"));
  }
  return { root, launcher: join(pkg, "bin", "avfs.js") };
}

/** A directory holding an executable `avfs` script with the given body. */
function fakeAvfs(body) {
  const dir = tempDir("agentvfs-cli-fake-");
  dirs.push(dir);
  writeFileSync(join(dir, "avfs"), `#!/bin/sh\n${body}\n`);
  chmodSync(join(dir, "avfs"), 0o755);
  return dir;
}

const say = (who) => fakeAvfs(`echo "${who} $*"`);

/** Runs the launcher with exactly this environment (nothing inherited). */
function launch(launcher, args, env, input) {
  return spawnSync(process.execPath, [launcher, ...args], { env, input, encoding: "utf8" });
}

test("AGENTVFS_BIN comes first, then the platform package, then PATH", () => {
  const onPath = say("path");
  const { launcher } = project({ platformBinary: join(say("package"), "avfs") });
  const explicit = join(say("env"), "avfs");

  assert.equal(launch(launcher, ["x"], { AGENTVFS_BIN: explicit, PATH: onPath }).stdout, "env x\n");
  assert.equal(launch(launcher, ["x"], { PATH: onPath }).stdout, "package x\n");
  assert.equal(launch(project().launcher, ["x"], { PATH: onPath }).stdout, "path x\n");
});

test("launchers on PATH (node_modules/.bin) are skipped, not started again", () => {
  const { root, launcher } = project();
  const bin = join(root, "node_modules", ".bin");
  mkdirSync(bin);
  symlinkSync("../agentvfs-cli/bin/avfs.js", join(bin, "avfs"));
  chmodSync(launcher, 0o755);
  const r = launch(launcher, ["x"], { PATH: [bin, say("real")].join(":") });
  assert.equal(r.stdout, "real x\n");
});

test("nothing found: exit 127 and a list of exactly what was tried", () => {
  const { launcher } = project();
  const empty = tempDir("agentvfs-cli-empty-");
  dirs.push(empty);
  const r = launch(launcher, ["version"], { PATH: empty });
  assert.equal(r.status, 127);
  assert.equal(r.stdout, "");
  const supported = PLATFORMS.includes(`${process.platform}-${process.arch}`);
  assert.equal(
    r.stderr,
    "agentvfs-cli: cannot find the avfs binary. Tried, in order:\n" +
      "  1. $AGENTVFS_BIN: not set\n" +
      (supported
        ? `  2. package ${platformPkg}: not installed (an optional dependency of agentvfs-cli)\n`
        : `  2. package ${platformPkg}: none is published for ${process.platform}-${process.arch} (there are: ${PLATFORMS.join(", ")})\n`) +
      `  3. avfs on $PATH: none in ${empty}\n` +
      "Install agentvfs-cli with its optional dependencies (not --omit=optional or --no-optional), " +
      "set AGENTVFS_BIN to an avfs binary, or put avfs on PATH.\n",
  );
});

test("a platform package whose binary is not executable is reported", () => {
  const fake = join(say("package"), "avfs");
  const { root, launcher } = project({ platformBinary: fake });
  chmodSync(join(root, "node_modules", platformPkg, "bin", "avfs"), 0o644);
  const r = launch(launcher, [], { PATH: "" });
  assert.equal(r.status, 127);
  assert.match(r.stderr, new RegExp(`package ${platformPkg}: installed in .*, but .*bin/avfs is missing or not executable`));
});

test("an AGENTVFS_BIN that is not executable is an error, never skipped", () => {
  const { launcher } = project();
  const r = launch(launcher, [], { AGENTVFS_BIN: "/nonexistent/avfs", PATH: say("path") });
  assert.equal(r.status, 127);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /1\. \$AGENTVFS_BIN=\/nonexistent\/avfs: not an executable file\nFix or unset AGENTVFS_BIN\./);
});

test("argv, stdin, stdout, stderr and the exit code pass through", () => {
  const dir = fakeAvfs(`for a in "$@"; do printf '[%s]\\n' "$a"; done; cat; echo "to stderr" >&2; exit 42`);
  const { launcher } = project();
  const args = ["--json", "proxy", "exec", "--shell", "echo 'a b' \"$X\"", "", "ünï", "-- x"];
  const r = launch(launcher, args, { AGENTVFS_BIN: join(dir, "avfs") }, "input\n");
  assert.equal(r.status, 42);
  assert.equal(r.stdout, args.map((a) => `[${a}]\n`).join("") + "input\n");
  assert.equal(r.stderr, "to stderr\n");
});

test("avfs killed by a signal: the launcher dies of the same signal", () => {
  const { launcher } = project();
  const r = launch(launcher, [], { AGENTVFS_BIN: join(fakeAvfs("kill -TERM $$"), "avfs") });
  assert.equal(r.status, null);
  assert.equal(r.signal, "SIGTERM");
});

test("a signal sent to the launcher reaches avfs", { timeout: 30_000 }, async () => {
  // The fake gives up after 20 s, so a failure cannot leave it behind.
  const dir = fakeAvfs(`trap 'echo "got TERM"; exit 7' TERM; echo ready; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; exit 9`);
  const { launcher } = project();
  const child = spawn(process.execPath, [launcher], { env: { AGENTVFS_BIN: join(dir, "avfs") } });
  let out = "";
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  await new Promise((resolve) => child.stdout.on("data", (d) => { out += d; if (out.includes("ready")) resolve(); }));
  child.kill("SIGTERM");
  assert.deepEqual(await exited, { code: 7, signal: null });
  assert.equal(out, "ready\ngot TERM\n");
});

test("the real avfs runs through the launcher", () => {
  const { launcher } = project();
  const r = launch(launcher, ["--json", "version"], { AGENTVFS_BIN: avfsBin() });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).json_contract_version, 1);
});

test("package.json: both bins, and every platform package pinned to this version", () => {
  const pkg = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
  assert.deepEqual(pkg.bin, { avfs: "bin/avfs.js", agentvfs: "bin/avfs.js" });
  const expected = Object.fromEntries(PLATFORMS.map((p) => [`agentvfs-cli-${p}`, pkg.version]));
  assert.deepEqual(pkg.optionalDependencies, expected);
  assert.equal(pkg.scripts?.postinstall, undefined, "no postinstall: nothing is downloaded at install time");
});
