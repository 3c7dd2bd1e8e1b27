#!/usr/bin/env bash
# Everything CI checks of the npm packages, from a clean tree:
#   1. npm ci (dev dependencies from the registry) and the tsc build;
#   2. npm pack agentvfs-cli, and the platform package of this machine made
#      from the avfs binary ($AVFS_BIN_PATH, else built here with go);
#   3. both tarballs installed --offline into a throwaway project, which then
#      runs create -> fork -> checkpoint -> proxy exec -> restore through the
#      `avfs` bin, and docs/guides/examples/typescript/example.mjs through the
#      typed client (and through tsc, against the installed types);
#   4. the unit tests (node --test);
#   5. `avfs mcp` driven by the official TypeScript MCP SDK's client
#      (@modelcontextprotocol/sdk, a dev dependency), over stdio and HTTP.
# Temp files live in one directory, removed on exit after unmounting
# whatever is still mounted from it.
set -euo pipefail

npm_dir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$npm_dir/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/agentvfs-npm-test.XXXXXX")
mkdir "$work/tmp"
export TMPDIR="$work/tmp" # the example's and the unit tests' temp dirs land here too
# Proxy runs unmount after themselves here: the temporary homes go at the
# end, and a mount left to linger would outlive them.
export AVFS_PROXY_LINGER=0
start=$SECONDS
say() { printf '\n== %s\n' "$*"; }

# unmount_all HOME: unmount every mount the avfs home HOME still has.
unmount_all() {
  [ -x "${bin:-}" ] && [ -d "$1" ] || return 0
  local mp
  "$bin" --home "$1" --json mounts 2>/dev/null |
    node -e 'for (const m of JSON.parse(require("fs").readFileSync(0, "utf8")).mounts) console.log(m.mountpoint)' 2>/dev/null |
    while IFS= read -r mp; do
      "$bin" --home "$1" --json unmount "$mp" >/dev/null 2>&1 || "$bin" --home "$1" --json unmount --lazy "$mp" >/dev/null 2>&1 || true
    done
}

cleanup() {
  local rc=$? home
  for home in "$work"/home-* "$work"/tmp/*; do unmount_all "$home"; done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# check JSON PATH EXPECTED: the value at PATH (keys and indexes joined by
# dots) of the JSON document JSON must be EXPECTED (JSON text).
check() {
  node -e '
    const [doc, path, want] = process.argv.slice(1);
    const got = JSON.stringify(path.split(".").reduce((v, k) => v?.[k], JSON.parse(doc)));
    if (got !== want) { console.error(`${path}: got ${got}, want ${want} in ${doc}`); process.exit(1); }
  ' "$1" "$2" "$3"
}

say "avfs binary"
if [ -n "${AVFS_BIN_PATH:-}" ]; then
  bin=$(realpath "$AVFS_BIN_PATH")
else
  go=$(command -v go || echo /usr/local/go/bin/go)
  (cd "$repo" && CGO_ENABLED=0 "$go" build -o "$work/avfs" ./cmd/avfs)
  bin=$work/avfs
fi
export AVFS_BIN_PATH=$bin # for the unit tests
"$bin" version
read -r goos goarch < <("$bin" version --json | node -e 'const v = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(v.os, v.arch)')

say "npm ci and build"
cd "$npm_dir"
npm ci --no-audit --no-fund
rm -rf agentvfs-cli/dist
npm run --silent build

say "npm pack agentvfs-cli and the $goos/$goarch platform package"
node scripts/stage-platform.mjs --binary "$bin" --goos "$goos" --goarch "$goarch" --out "$work/stage/platform" >/dev/null
mkdir "$work/pkgs"
npm pack --silent --pack-destination "$work/pkgs" ./agentvfs-cli "$work/stage/platform"

say "install both tarballs offline into a new project"
proj=$work/project
mkdir "$proj"
cd "$proj"
echo '{ "name": "agentvfs-cli-smoke", "private": true }' >package.json
npm install --offline --no-audit --no-fund --cache "$work/npm-cache" "$work"/pkgs/*.tgz
# No AGENTVFS_BIN from here on: the installed platform package must be what runs.
unset AGENTVFS_BIN
source=$(node --input-type=module -e 'import { resolveBinary } from "agentvfs-cli"; console.log(resolveBinary().source)')
[ "$source" = package ] || { echo "the launcher found avfs through $source, not the platform package" >&2; exit 1; }

say "create -> fork -> checkpoint -> proxy exec -> restore through the avfs bin"
export AVFS_HOME=$work/home-bin
avfs() { "$proj/node_modules/.bin/avfs" --json "$@"; }
check "$(npx --offline agentvfs --json version)" json_contract_version 1
check "$(avfs vault create base)" name '"base"'
check "$(avfs --vault base write /README hello)" created true
check "$(avfs vault fork base task)" source '"base"'
check "$(avfs --vault task checkpoint save before)" name '"before"'
run=$(avfs --vault task proxy exec --shell "echo hi > f.txt")
check "$run" result.state '"completed"'
check "$run" result.changes.0.path '"/f.txt"'
check "$(avfs --vault task cat /f.txt)" content '"hi\n"'
check "$(avfs --vault task checkpoint restore before)" name '"before"'
check "$(avfs --vault task ls /)" entries.length 1
set +e
denied=$(avfs --vault task proxy exec -- cat /etc/passwd)
rc=$?
set -e
[ "$rc" = 14 ] || { echo "a denied proxy exec exited $rc through the launcher, not 14" >&2; exit 1; }
check "$denied" result.state '"denied"'
unset AVFS_HOME

say "the guide's example through the typed client"
cp "$repo/docs/guides/examples/typescript/example.mjs" "$proj/"
node "$proj/example.mjs"
# ... and type-checked against the installed .d.ts, as a consumer's tsc finds
# them (through package.json "exports").
"$npm_dir/node_modules/.bin/tsc" --noEmit --allowJs --checkJs --strict --module nodenext --moduleResolution nodenext \
  --target es2022 --typeRoots "$npm_dir/node_modules/@types" --types node "$proj/example.mjs"

say "unit tests"
cd "$npm_dir"
npm test

say "avfs mcp through the TypeScript MCP SDK, over stdio and HTTP"
node "$npm_dir/scripts/mcp-test.mjs" "$bin" "$work"

say "nothing left behind"
if grep -F "$work" /proc/mounts; then echo "mounts left under $work" >&2; exit 1; fi
# (Read /proc from node, which gets the path through the environment, so it
# does not find itself; procps may not be installed.)
left=$(WORK=$work node -e '
  const fs = require("fs");
  for (const pid of fs.readdirSync("/proc").filter((p) => /^[0-9]+$/.test(p))) {
    let cmd = "";
    try { cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" "); } catch {}
    if (cmd.includes(process.env.WORK)) console.log(pid, cmd);
  }')
if [ -n "$left" ]; then printf 'processes left running:\n%s\n' "$left" >&2; exit 1; fi
echo "npm packages: all checks passed in $((SECONDS - start))s"
