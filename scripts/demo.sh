#!/usr/bin/env bash
# The avfs demo: a real end-to-end run on the default SQLite engine, in a
# throwaway AVFS_HOME. It grows with each capability.
set -euo pipefail
cd "$(dirname "$0")/.."
avfs() { "$PWD/bin/avfs" "$@"; }
export AVFS_HOME
AVFS_HOME=$(mktemp -d)
# A proxy run leaves its mount for the next run (--linger): end any first.
cleanup() {
	for m in $(avfs mounts 2>/dev/null | awk 'NR > 1 { print $2 }'); do avfs unmount "$m" >/dev/null 2>&1 || true; done
	rm -rf "$AVFS_HOME" ${MNT:+"$MNT"}
}
trap cleanup EXIT
step() { printf '\n\033[1m$ avfs %s\033[0m\n' "$*"; avfs "$@"; }

step vault create myproject --use
step mkdir -p /src
step write /src/main.go 'package main

func main() { println("hello from a vault") }'
step write /README.md '# myproject'
step checkpoint save base -m "first import"

step vault fork myproject task-001 --use
step write /src/main.go 'package main

func main() { println("refactored in the fork") }'
step write /src/util.go 'package main'
step rm /README.md
step checkpoint diff vault:myproject
step --json checkpoint save before-risky-work

step write /src/main.go 'oops, a bad edit'
step cat /src/main.go
step checkpoint restore before-risky-work
step cat /src/main.go

step --vault myproject cat /src/main.go

# One command through the proxy boundary: policy, checkpoint, mount, run,
# change summary, one JSON envelope.
step proxy exec --json --shell 'ls src && echo "- refactor main" > notes.txt && grep -rn main src'
# A networked command is not run: it waits for a person's approval (exit 15).
printf '\n\033[1m$ avfs proxy exec --shell "curl https://example.com"\033[0m\n'
avfs proxy exec --shell 'curl https://example.com' | grep -E '"(state|reason)"' | sed 's/^ *//' | sort -u || true
step proxy history
step proxy undo
step ls /

# The vault as a real directory: ordinary tools work in it.
MNT=$(mktemp -d)
trap 'avfs unmount --lazy "$MNT" >/dev/null 2>&1 || true; cleanup' EXIT
step mount task-001 "$MNT"
printf '\n\033[1m$ (cd %s && ls -l src && echo "notes" > notes.txt && grep -rn main .)\033[0m\n' "$MNT"
(cd "$MNT" && ls -l src && echo "notes" > notes.txt && grep -rn main .)
step unmount "$MNT"
step checkpoint diff before-risky-work

step vault list
step fsck
