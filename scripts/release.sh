#!/usr/bin/env bash
# Release builds of avfs: static binaries (CGO_ENABLED=0, the SQLite driver
# is pure Go) for linux and darwin on amd64 and arm64, with the version
# stamped in, and their SHA-256 sums.
#
#   scripts/release.sh [VERSION]
#
# VERSION defaults to $VERSION, else `git describe --tags --always --dirty`,
# else "devel"; `avfs version` prints it. Writes dist/avfs-<os>-<arch> and
# dist/SHA256SUMS (the format of `sha256sum -c`). Environment:
#   DIST      output directory (default dist, in the repository root)
#   TARGETS   os/arch pairs to build (default "linux/amd64 linux/arm64
#             darwin/amd64 darwin/arm64")
#   GO        the go command (default go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
DIST=${DIST:-dist}
TARGETS=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
VERSION=${1:-${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}}
PKG=github.com/agentvfs/agentvfs

mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
names=()
for target in $TARGETS; do
	os=${target%/*}
	arch=${target#*/}
	out="avfs-$os-$arch"
	echo "building $out ($VERSION)" >&2
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath \
		-ldflags "-s -w -X $PKG/internal/cli.version=$VERSION" \
		-o "$DIST/$out" ./cmd/avfs
	names+=("$out")
done

cd "$DIST"
if command -v sha256sum >/dev/null 2>&1; then
	sha256sum -- "${names[@]}" >SHA256SUMS
else
	shasum -a 256 -- "${names[@]}" >SHA256SUMS # macOS
fi
echo "wrote $DIST: ${names[*]} SHA256SUMS" >&2
