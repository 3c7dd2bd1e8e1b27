#!/usr/bin/env node
// Writes a ready-to-pack platform package (agentvfs-cli-<os>-<cpu>) from a
// built avfs binary, for release builds and for npm/scripts/test.sh:
//
//   node npm/scripts/stage-platform.mjs --binary dist/avfs-linux-amd64 \
//     --goos linux --goarch amd64 --out /tmp/stage/linux-x64 [--version 0.1.0]
//   npm pack /tmp/stage/linux-x64
//
// The package is npm/platform/*.tmpl filled in, plus the binary at bin/avfs.
// Its version defaults to agentvfs-cli's, which pins its platform packages
// to exactly that version in optionalDependencies.
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const npmDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const GOOS = { linux: "linux", darwin: "darwin" };
const GOARCH = { amd64: "x64", arm64: "arm64" };

function fail(message) {
  console.error(`stage-platform: ${message}`);
  process.exit(2);
}

const { values: a } = parseArgs({
  options: {
    binary: { type: "string" },
    goos: { type: "string" },
    goarch: { type: "string" },
    out: { type: "string" },
    version: { type: "string" },
  },
});
if (!a.binary || !a.goos || !a.goarch || !a.out) {
  fail("usage: stage-platform.mjs --binary PATH --goos GOOS --goarch GOARCH --out DIR [--version V]");
}
const os = GOOS[a.goos] ?? fail(`no npm package for GOOS ${a.goos} (supported: ${Object.keys(GOOS).join(", ")})`);
const cpu = GOARCH[a.goarch] ?? fail(`no npm package for GOARCH ${a.goarch} (supported: ${Object.keys(GOARCH).join(", ")})`);
const platform = `${os}-${cpu}`;

const main = JSON.parse(readFileSync(join(npmDir, "agentvfs-cli", "package.json"), "utf8"));
const name = `agentvfs-cli-${platform}`;
if (!(name in (main.optionalDependencies ?? {}))) fail(`${name} is not an optional dependency of agentvfs-cli`);
const version = a.version ?? main.version;

// Read the binary's header, so a mix-up of binaries is caught before one is
// published under the wrong platform.
if (!existsSync(a.binary)) fail(`${a.binary} does not exist`);
const header = Buffer.alloc(20);
const fd = openSync(a.binary, "r");
readSync(fd, header, 0, header.length, 0);
closeSync(fd);
const found =
  header.readUInt32BE(0) === 0x7f454c46 ? ["linux", { 0x3e: "amd64", 0xb7: "arm64" }[header.readUInt16LE(18)]] :
  header.readUInt32LE(0) === 0xfeedfacf ? ["darwin", { 0x01000007: "amd64", 0x0100000c: "arm64" }[header.readUInt32LE(4)]] :
  ["unknown", "unknown"];
if (found[0] !== a.goos || found[1] !== a.goarch) fail(`${a.binary} is not a ${a.goos}/${a.goarch} executable (it looks like ${found.join("/")})`);

const out = resolve(a.out);
mkdirSync(out, { recursive: true });
if (readdirSync(out).length > 0) fail(`${out} is not empty`);

const vars = { platform, os, cpu, goos: a.goos, goarch: a.goarch, version };
const fill = (file) =>
  readFileSync(join(npmDir, "platform", file), "utf8").replace(/\{\{(\w+)\}\}/g, (_, k) => vars[k] ?? fail(`${file}: unknown {{${k}}}`));

const manifest = JSON.parse(fill("package.json.tmpl")); // parsing checks the template
writeFileSync(join(out, "package.json"), JSON.stringify(manifest, null, 2) + "\n");
writeFileSync(join(out, "README.md"), fill("README.md.tmpl"));
mkdirSync(join(out, "bin"));
copyFileSync(a.binary, join(out, "bin", "avfs"));
chmodSync(join(out, "bin", "avfs"), 0o755);
console.log(out);
