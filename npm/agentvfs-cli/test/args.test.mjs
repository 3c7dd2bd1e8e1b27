// Command lines: flags, then `--`, then positional values; durations in the
// units both clients share. Pure functions, then the generated stubs
// against the real avfs binary.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Avfs, commandArgs, duration } from "../dist/index.js";
import { avfsBin, removeHome, schemaErrors, tempDir } from "./helpers.mjs";

test("durations: numbers and bare-number strings are milliseconds, other strings Go durations", () => {
  assert.equal(duration(1500), "1500000us");
  assert.equal(duration(1.5), "1500us");
  assert.equal(duration("200"), "200000us");
  assert.equal(duration("2.5"), "2500us");
  assert.equal(duration("1.5s"), "1.5s");
  assert.equal(duration("200ms"), "200ms");
  assert.equal(duration(0), "0us");
  assert.throws(() => duration(-1), RangeError);
  assert.throws(() => duration(Infinity), RangeError);
});

test("flags come first, then -- and the positional values", () => {
  assert.deepEqual(
    commandArgs(["write"], [["/f", false], ["--json", true]], [["--append", "bool", true]]),
    ["write", "--append", "--", "/f", "--json"],
  );
  assert.deepEqual(commandArgs(["vault", "list"], [], []), ["vault", "list"]);
  assert.deepEqual(
    commandArgs(["proxy", "exec"], [[["ls", "-l"], true]],
      [["--env", "repeat", ["A=1", "B=2"]], ["--timeout", "duration", 250], ["--max-output", "int64", 10], ["--cwd", "string", undefined]]),
    ["proxy", "exec", "--env", "A=1", "--env", "B=2", "--timeout", "250000us", "--max-output", "10", "--", "ls", "-l"],
  );
});

test("an optional value after one left out is refused, a bad flag value too", () => {
  assert.throws(() => commandArgs(["diff"], [[undefined, true], ["x", true]], []), RangeError);
  assert.deepEqual(commandArgs(["mount"], [[undefined, true], ["/mp", false]], []), ["mount", "--", "/mp"]);
  assert.throws(() => commandArgs(["tree"], [], [["--level", "int", 1.5]]), TypeError);
  assert.throws(() => commandArgs(["ls"], [], [["--all", "bool", "yes"]]), TypeError);
});

let home, avfs;
before(() => {
  home = tempDir("agentvfs-cli-stubs-");
  avfs = new Avfs({ bin: avfsBin(), home, vault: "stubs" });
});
after(() => removeHome(home));

test("the generated stubs run the real avfs: a value that looks like a flag stays a value", async () => {
  const v = await avfs.commands.vaultCreate("stubs");
  assert.deepEqual(schemaErrors("vault-info.json", v), []);
  await avfs.commands.write("/f", "--help");
  assert.equal((await avfs.commands.cat("/f")).content, "--help");
  await avfs.commands.mkdir("/a/b", { parents: true });
  const tree = await avfs.commands.tree("/", { level: 1 });
  assert.deepEqual(schemaErrors("tree.json", tree), []);
  const run = await avfs.commands.proxyExec(["sh", "-c", "echo $X"], { env: ["X=from-env"], timeout: "10s", linger: 0 });
  assert.equal(run.result.state, "completed");
  assert.equal(run.result.stdout, "from-env\n");
  assert.equal(run.request.timeout_ms, 10000);
  await assert.rejects(avfs.commands.checkpointInfo("nope"), (e) => e.error === "CheckpointNotFound");
});
