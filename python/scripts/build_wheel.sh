#!/usr/bin/env bash
# Build the wheels of the pip package agentvfs-cli, offline.
#
#   build_wheel.sh BINARY GOOS GOARCH [OUTDIR]   platform wheel with BINARY inside
#   build_wheel.sh --pure [OUTDIR]                sdist and pure wheel (no binary)
#
# OUTDIR defaults to dist/ at the top of the repository. AGENTVFS_VERSION,
# when set, is stamped as the package version (a release passes its tag);
# PYTHON picks the interpreter (default Debian's /usr/bin/python3, which has
# python3-build, python3-setuptools and python3-wheel).
#
# The build runs in a copy of python/, so the work tree gets no build/,
# *.egg-info or staged binary. Prints the path of each file built.
set -euo pipefail

usage() { sed -n '4,5p' "$0" | sed 's/^# *//' >&2; exit 2; }

pydir=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$pydir/.." && pwd)
PY=${PYTHON:-/usr/bin/python3}

pure=0
if [ "${1:-}" = "--pure" ]; then
  pure=1
  out=${2:-$repo/dist}
  [ $# -le 2 ] || usage
else
  [ $# -ge 3 ] && [ $# -le 4 ] || usage
  binary=$1 goos=$2 goarch=$3
  out=${4:-$repo/dist}
  [ -f "$binary" ] || { echo "build_wheel: no binary at $binary" >&2; exit 1; }
  "$PY" "$pydir/scripts/platform_wheel.py" --check "$binary" "$goos" "$goarch"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

stage=$(mktemp -d "${TMPDIR:-/tmp}/agentvfs-wheel.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# A clean copy of the package sources: no build output, no staged binary.
tar -C "$pydir" --exclude=./build --exclude=./dist --exclude='*.egg-info' \
  --exclude=__pycache__ --exclude=.pytest_cache --exclude=./src/agentvfs/_bin \
  -cf - . | tar -C "$stage" -xf -

if [ -n "${AGENTVFS_VERSION:-}" ]; then
  printf '"""The package version, stamped by scripts/build_wheel.sh."""\n\n__version__ = "%s"\n' \
    "$AGENTVFS_VERSION" > "$stage/src/agentvfs/_version.py"
fi

export PYTHONDONTWRITEBYTECODE=1
if [ "$pure" = 1 ]; then
  "$PY" -m build --no-isolation --outdir "$stage/out" "$stage" >&2
  for f in "$stage"/out/*; do cp "$f" "$out/"; echo "$out/$(basename "$f")"; done
  exit 0
fi

exe=avfs
mkdir -p "$stage/src/agentvfs/_bin"
install -m 0755 "$binary" "$stage/src/agentvfs/_bin/$exe"
"$PY" -m build --wheel --no-isolation --outdir "$stage/out" "$stage" >&2
"$PY" "$pydir/scripts/platform_wheel.py" "$stage"/out/*.whl "$binary" "$goos" "$goarch" "$out"
