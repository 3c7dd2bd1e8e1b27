#!/usr/bin/env bash
# Installs the Debian packages avfs's tests and demo use, when missing.
# Safe to run again: it does nothing when everything is there.
set -euo pipefail
need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v git >/dev/null 2>&1 || need+=(git)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v tar >/dev/null 2>&1 || need+=(tar)
# proxy exec runs commands in namespaces made by bubblewrap (--isolate).
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
# The PostgreSQL engine's tests start their own server (initdb, pg_ctl).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
# make release (and so TestRelease, in the Go suite) builds the sdist and
# wheels with Debian's python3; the Python package's tests also need pytest
# and venv. Checked against /usr/bin/python3, which those scripts use.
for mod in build:python3-build wheel:python3-wheel setuptools:python3-setuptools \
  pytest:python3-pytest venv:python3-venv; do
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import ${mod%%:*}" 2>/dev/null || need+=("${mod#*:}")
done
# The npm package's tests (make test-npm); machines of this kind ship
# Node.js 20, Debian's is the fallback.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# Other users mount through fusermount3, which opens /dev/fuse: Debian's
# udev rule makes it 0666; machines without udev (containers) leave it
# 0600, and the proxy's tests as an unprivileged user skip.
if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" != 666 ]; then
  echo "avfs: chmod 0666 /dev/fuse (as Debian's udev does)" >&2
  chmod 0666 /dev/fuse
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "avfs: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
echo "avfs: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
