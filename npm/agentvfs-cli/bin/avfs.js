#!/usr/bin/env node
// agentvfs-cli-launcher: runs the native avfs binary (found by
// resolveBinary: $AGENTVFS_BIN, the platform package, PATH) with this
// process's arguments and stdio, and ends as it ends: same exit code, or
// killed by the same signal. The marker on the first line lets
// resolveBinary skip launchers found on PATH instead of starting itself.
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { BinaryNotFoundError, resolveBinary } from "../dist/resolve.js";

let bin;
try {
  bin = resolveBinary().path;
} catch (err) {
  if (!(err instanceof BinaryNotFoundError)) throw err;
  process.stderr.write(err.message + "\n");
  process.exit(127);
}

// Signals sent to this process (by a supervisor, a timeout, a parent's
// kill()) go to avfs, which cleans up and exits; we then exit the same way.
// The handlers go in before avfs starts: a signal that arrived between the
// two would otherwise kill this process and leave avfs running alone. Node
// delivers signals from its event loop, so `child` is set by then.
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
let child;
const forward = (signal) => child.kill(signal);
for (const s of FORWARDED) process.on(s, forward);

child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });

child.on("error", (err) => {
  process.stderr.write(`agentvfs-cli: cannot run ${bin}: ${err.message}\n`);
  process.exit(err.code === "ENOENT" ? 127 : 126);
});

child.on("exit", (code, signal) => {
  if (signal === null) process.exit(code ?? 1);
  for (const s of FORWARDED) process.off(s, forward);
  process.kill(process.pid, signal);
  // Still alive: a signal Node ignores (SIGPIPE). Report it as a shell would.
  setTimeout(() => process.exit(128 + (constants.signals[signal] ?? 0)), 100);
});
