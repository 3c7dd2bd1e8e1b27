#!/usr/bin/env bash
# Release builds of avfs: static binaries (CGO_ENABLED=0, the SQLite driver
# is pure Go) for linux and darwin on amd64 and arm64, with the version
# stamped in, and their SHA-256 sums.
#
#   scripts/release.sh [VERSION]
#
# VERSION defaults to $VERSION, else `git describe --tags --always --dirty`,
# else "devel"; `avfs version` prints it. Writes dist/avfs-<os>-<arch>, the
# packages ready to publish, and dist/SHA256SUMS over all of them (the
# format of `sha256sum -c`):
#
#   dist/npm/agentvfs-cli-<v>.tgz and one agentvfs-cli-<os>-<cpu>-<v>.tgz per
#     target (`npm publish FILE`: the platform packages first);
#   dist/python/ the sdist, the pure wheel and one platform wheel per target
#     (`twine upload dist/python/*`), built offline with Debian's python3.
#
# The packages keep the versions committed in npm/agentvfs-cli/package.json
# and python/src/agentvfs/_version.py. Environment:
#   DIST      output directory (default dist, in the repository root)
#   TARGETS   os/arch pairs to build (default "linux/amd64 linux/arm64
#             darwin/amd64 darwin/arm64")
#   GO        the go command (default go)
#   PACKAGES  0: the binaries only (no node, npm or python3 needed)
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

if [ "${PACKAGES:-1}" != 0 ]; then
	repo=$(pwd)
	stage=$(mktemp -d "${TMPDIR:-/tmp}/avfs-release.XXXXXX")
	trap 'rm -rf "$stage"' EXIT
	rm -rf "$DIST/npm" "$DIST/python"
	mkdir -p "$DIST/npm" "$DIST/python"
	echo "building the npm packages" >&2
	(cd npm && npm ci --no-audit --no-fund >&2 && rm -rf agentvfs-cli/dist && npm run --silent build >&2)
	npm pack --silent --pack-destination "$DIST/npm" ./npm/agentvfs-cli >/dev/null
	echo "building the sdist and the pure wheel" >&2
	bash python/scripts/build_wheel.sh --pure "$DIST/python" >/dev/null
	for target in $TARGETS; do
		os=${target%/*}
		arch=${target#*/}
		node npm/scripts/stage-platform.mjs --binary "$DIST/avfs-$os-$arch" --goos "$os" --goarch "$arch" \
			--out "$stage/npm-$os-$arch" >/dev/null
		npm pack --silent --pack-destination "$DIST/npm" "$stage/npm-$os-$arch" >/dev/null
		echo "building the $os/$arch wheel" >&2
		bash python/scripts/build_wheel.sh "$DIST/avfs-$os-$arch" "$os" "$arch" "$DIST/python" >/dev/null
	done
	cd "$DIST"
	for f in npm/* python/*; do names+=("$f"); done
	cd "$repo"
fi

cd "$DIST"
if command -v sha256sum >/dev/null 2>&1; then
	sha256sum -- "${names[@]}" >SHA256SUMS
else
	shasum -a 256 -- "${names[@]}" >SHA256SUMS # macOS
fi
echo "wrote $DIST: ${names[*]} SHA256SUMS" >&2
