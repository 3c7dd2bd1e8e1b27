#!/usr/bin/env bash
# Everything CI needs for the pip package agentvfs-cli, from a clean tree,
# offline (Debian's packages only):
#
#   AVFS_BIN_PATH=bin/avfs bash python/scripts/test.sh   # or unset: go build
#
#  1. installs the Debian packages it needs when missing (as root);
#  2. builds the sdist and the pure wheel from the tree, and a platform wheel
#     holding the avfs binary (scripts/build_wheel.sh), and checks them;
#  3. installs the platform wheel offline into a fresh venv, drives
#     create -> fork -> checkpoint -> proxy exec -> restore through the
#     console script and `python -m agentvfs`, runs the guide's example with
#     the client, and runs pytest against the installed package;
#  4. installs the pure wheel into a second venv and checks where it finds
#     avfs ($AGENTVFS_BIN, the cache, nothing).
#
# Whatever happens, it unmounts what it mounted, removes its temporary files
# and the build/ or *.egg-info it made in the tree, and fails if a process
# of its own avfs binaries is still running at the end.
set -euo pipefail

pydir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$pydir/.." && pwd)
PY=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export PATH="$PATH:/usr/local/go/bin"
# Proxy runs unmount after themselves here: the temporary homes go at the
# end, and a mount left to linger would outlive them.
export AVFS_PROXY_LINGER=0
started=$(date +%s)

say() { printf '== [%3ss] %s\n' "$(( $(date +%s) - started ))" "$*" >&2; }
die() { printf 'python/scripts/test.sh: %s\n' "$*" >&2; exit 1; }

# --- 1. Debian packages ----------------------------------------------------
need=()
"$PY" -c 'import build' 2>/dev/null || need+=(python3-build)
"$PY" -c 'import wheel' 2>/dev/null || need+=(python3-wheel)
"$PY" -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
"$PY" -c 'import setuptools' 2>/dev/null || need+=(python3-setuptools)
"$PY" -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})"
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- temporary space and cleanup -------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentvfs-test.XXXXXX")
export TMPDIR=$tmp   # whatever anything below makes in temp space is removed with it
made=()
for p in "$pydir/build" "$pydir/src/agentvfs_cli.egg-info"; do
  [ -e "$p" ] || made+=("$p")
done

# Mountpoints under $tmp, deepest first.
our_mounts() { awk -v t="$tmp" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
# Pids of processes running a binary under $tmp: only this script starts those.
our_pids() {
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in "$tmp"/*) echo "${p#/proc/}" ;; esac
  done
}

cleanup() {
  local rc=$? m pid left i
  for m in $(our_mounts); do
    echo "python/scripts/test.sh: unmounting leftover $m" >&2
    fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  left=""
  for i in $(seq 50); do
    left=$(our_pids)
    [ -z "$left" ] && break
    sleep 0.1
  done
  if [ -n "$left" ]; then
    echo "python/scripts/test.sh: processes left behind: $left; killing them" >&2
    for pid in $left; do kill -9 "$pid" 2>/dev/null || true; done
    [ "$rc" -ne 0 ] || rc=1
  fi
  rm -rf "$tmp"
  for m in "${made[@]}"; do rm -rf "$m"; done
  if [ "$rc" -eq 0 ]; then say "python: all passed in $(( $(date +%s) - started ))s"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A field of a JSON file: field FILE 'python expression over d'.
field() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# --- the avfs binary -------------------------------------------------------
if [ -n "${AVFS_BIN_PATH:-}" ]; then
  bin=$(realpath "$AVFS_BIN_PATH")
else
  say "building avfs"
  (cd "$repo" && CGO_ENABLED=0 go build -o "$tmp/avfs" ./cmd/avfs)
  bin=$tmp/avfs
fi
[ -x "$bin" ] || die "no avfs binary at $bin"
"$bin" version --json >"$tmp/version.json"
goos=$(field "$tmp/version.json" 'd["os"]')
goarch=$(field "$tmp/version.json" 'd["arch"]')

# --- the generated models and stubs are in step with the contract -----------
# (npm/scripts/gen-types.mjs writes models.py and _commands.py from
# docs/schema and docs/commands.json; npm test checks the same)
if command -v node >/dev/null 2>&1; then
  node "$repo/npm/scripts/gen-types.mjs" --check || die "generated client files are stale"
else
  say "node not found: the staleness check of the generated files runs in npm/scripts/test.sh"
fi

# --- 2. build and check the distributions ----------------------------------
say "building the sdist and the pure wheel from the tree"
"$PY" -m build --no-isolation --outdir "$tmp/dist" "$pydir" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log" >&2; die "python -m build failed"; }
say "building the platform wheel ($goos/$goarch)"
bash "$pydir/scripts/build_wheel.sh" "$bin" "$goos" "$goarch" "$tmp/platform" >"$tmp/platform.txt" 2>"$tmp/build-platform.log" ||
  { cat "$tmp/build-platform.log" >&2; die "build_wheel.sh failed"; }
plat_whl=$(tail -n 1 "$tmp/platform.txt")
pure_whl=$(ls "$tmp"/dist/*-py3-none-any.whl)
sdist=$(ls "$tmp"/dist/*.tar.gz)

"$PY" - "$sdist" "$pure_whl" "$plat_whl" <<'EOF'
"""The distributions hold what they should, and the platform wheel is sound."""
import base64, hashlib, sys, tarfile, zipfile

sdist, pure, plat = sys.argv[1:]
names = tarfile.open(sdist).getnames()
assert any(n.endswith("src/agentvfs/client.py") for n in names), names
assert not any("/_bin/" in n for n in names), "the sdist must not hold a binary"

z = zipfile.ZipFile(pure)
assert not any(n.startswith("agentvfs/_bin/") for n in z.namelist()), "the pure wheel must not hold a binary"
assert "agentvfs/py.typed" in z.namelist()

z = zipfile.ZipFile(plat)
info = z.getinfo("agentvfs/_bin/avfs")
assert (info.external_attr >> 16) & 0o111, "_bin/avfs must be executable in the wheel"
dist_info = next(n.split("/")[0] for n in z.namelist() if ".dist-info/" in n)
wheel = z.read(dist_info + "/WHEEL").decode()
assert "Root-Is-Purelib: false" in wheel and "Tag: py3-none-any" not in wheel, wheel
assert "-py3-none-any" not in plat
for line in z.read(dist_info + "/RECORD").decode().splitlines():
    name, digest, size = line.rsplit(",", 2)
    if not digest:
        continue
    data = z.read(name)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == want and int(size) == len(data), f"RECORD is wrong for {name}"
print("distributions ok:", plat.rsplit("/", 1)[-1])
EOF

# --- 3. the platform wheel, installed offline ------------------------------
say "installing the platform wheel into a venv"
"$PY" -m venv --system-site-packages "$tmp/venv"
V=$tmp/venv/bin
"$V/python" -m pip install --no-index --no-deps --no-cache-dir --quiet "$plat_whl"
cd "$tmp"   # nothing below may import the sources of the tree by accident
installed=$("$V/python" -c 'import agentvfs; print(agentvfs.__file__)')
case $installed in "$tmp/venv/"*) ;; *) die "agentvfs imported from $installed, not from the venv" ;; esac
[ "$("$V/python" -c 'import agentvfs; print(agentvfs.resolve_binary())')" = "$(dirname "$installed")/_bin/avfs" ] ||
  die "the installed package does not run its own binary"

say "driving create -> fork -> checkpoint -> proxy exec -> restore with the console script"
unset AGENTVFS_BIN AVFS_VAULT
export AVFS_HOME=$tmp/home-cli
"$V/agentvfs" vault create base --json >/dev/null
"$V/agentvfs" --vault base write /README "base" --json >/dev/null
"$V/agentvfs" --vault base checkpoint save v1 --json >/dev/null
"$V/python" -m agentvfs vault fork base task --json >"$tmp/fork.json"
[ "$(field "$tmp/fork.json" 'd["source"]')" = base ]
"$V/agentvfs" --vault task proxy exec --json --shell 'echo hi > f.txt' >"$tmp/run.json"
[ "$(field "$tmp/run.json" '(d["success"], d["result"]["state"], [(c["path"], c["kind"]) for c in d["result"]["changes"]])')" = \
  "(True, 'completed', [('/f.txt', 'added')])" ] || { cat "$tmp/run.json" >&2; die "unexpected proxy exec envelope"; }
"$V/python" -m agentvfs --vault task cat /f.txt >"$tmp/f.txt"
[ "$(cat "$tmp/f.txt")" = hi ]
"$V/agentvfs" --vault task checkpoint restore "$(field "$tmp/run.json" 'd["result"]["checkpoint"]["name"]')" --json >/dev/null
"$V/python" -m agentvfs --vault task ls / --json >"$tmp/ls.json"
[ "$(field "$tmp/ls.json" '[e["name"] for e in d["entries"]]')" = "['README']" ]
rc=0; "$V/agentvfs" --vault task proxy exec --json -- rm -rf / >"$tmp/denied.json" || rc=$?
[ "$rc" = 14 ] && [ "$(field "$tmp/denied.json" 'd["result"]["state"]')" = denied ] || die "deny: exit $rc"
rc=0; "$V/python" -m agentvfs vault info nope --json >"$tmp/err.json" || rc=$?
[ "$rc" = 3 ] && [ "$(field "$tmp/err.json" 'd["error"]')" = VaultNotFound ] || die "error document: exit $rc"
unset AVFS_HOME

say "running the guide's example (docs/guides/examples/python/example.py)"
"$V/python" "$repo/docs/guides/examples/python/example.py" >"$tmp/example.log" 2>&1 ||
  { cat "$tmp/example.log" >&2; die "the example failed"; }
tail -n 1 "$tmp/example.log" | grep -qx ok || { cat "$tmp/example.log" >&2; die "the example did not finish"; }

# --- 4. the pure wheel: the binary comes from elsewhere ---------------------
say "installing the pure wheel into a venv"
"$PY" -m venv --system-site-packages --without-pip "$tmp/venv-pure"
P=$tmp/venv-pure/bin
"$V/python" -m pip --python "$P/python" install --no-index --no-deps --no-cache-dir --quiet "$pure_whl"
nobin_path=$P:/usr/bin:/bin   # the venv's scripts and the system, without any avfs
[ ! -e /usr/bin/avfs ] && [ ! -e /bin/avfs ] || nobin_path=$P
rc=0
env -u AGENTVFS_BIN PATH="$nobin_path" XDG_CACHE_HOME="$tmp/empty-cache" "$P/agentvfs" version --json \
  >"$tmp/notfound.json" 2>/dev/null || rc=$?
[ "$rc" = 1 ] && [ "$(field "$tmp/notfound.json" '[t["source"] for t in d["tried"]]')" = \
  "['\$AGENTVFS_BIN', 'package data', 'cache', 'PATH']" ] || die "pure wheel without a binary: exit $rc"
AGENTVFS_BIN=$bin PATH="$nobin_path" "$P/agentvfs" version --json >/dev/null
version=$("$P/python" -c 'import agentvfs; print(agentvfs.__version__)')
mkdir -p "$tmp/cache/agentvfs/$version"
ln -s "$bin" "$tmp/cache/agentvfs/$version/avfs"
env -u AGENTVFS_BIN PATH="$nobin_path" XDG_CACHE_HOME="$tmp/cache" "$P/python" -m agentvfs version --json >/dev/null

# --- pytest, against the installed platform wheel --------------------------
say "pytest"
AVFS_BIN_PATH=$bin "$V/python" -m pytest -p no:cacheprovider --basetemp="$tmp/pytest" -q -rs --durations=5 "$pydir/tests"
