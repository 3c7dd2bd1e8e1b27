#!/usr/bin/env bash
# The runnable example of docs/guides/shell.md: an agent workspace driven
# from a shell script through `avfs ... --json`, parsed with python3 (no jq).
#
#   AVFS_HOME=$(mktemp -d) docs/guides/examples/shell/example.sh
#
# It uses `avfs` on PATH (or $AVFS), works in $AVFS_HOME (default ~/.avfs),
# and deletes the vaults it creates. The steps that run commands need FUSE;
# without it they report FuseUnavailable and the script goes on.
set -euo pipefail
AVFS=${AVFS:-avfs}
# The interpreter itself, run with -S below (json is in the standard
# library): a version manager's python3 shim can take seconds to start, and
# the script parses many documents.
PYTHON=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}

# jget FIELD: one field of the JSON document on stdin, by a dotted path
# (result.exit_code, changes.0.path); empty when absent, JSON for objects.
jget() {
	"$PYTHON" -S -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    if isinstance(v, list) and k.isdigit() and int(k) < len(v):
        v = v[int(k)]
    elif isinstance(v, dict) and k in v:
        v = v[k]
    else:
        v = None
        break
if v is None:
    print("")
elif isinstance(v, (dict, list)):
    print(json.dumps(v))
elif isinstance(v, bool):
    print("true" if v else "false")
else:
    print(v)
' "$1"
}

# avfs_json ARGS...: run avfs with --json, keep its one document in $doc and
# its exit code in $code, and never stop the script: the caller decides.
avfs_json() {
	code=0
	doc=$("$AVFS" --json "$@") || code=$?
}

# --- a repository imported into a vault -------------------------------------
repo=$(mktemp -d)
mkdir "$repo/src"
echo 'hello, world' > "$repo/src/greet.txt"
echo '# greet' > "$repo/README.md"
avfs_json vault create shell-base --from "$repo"
if [ "$code" -ne 0 ]; then
	echo "vault create failed: $(jget error <<<"$doc"): $(jget message <<<"$doc")" >&2
	exit 1
fi
trap '"$AVFS" vault delete shell-task --yes >/dev/null 2>&1 || true
      "$AVFS" vault delete shell-base --yes >/dev/null 2>&1 || true
      rm -rf "$repo"' EXIT
echo "created $(jget name <<<"$doc") ($(jget backend <<<"$doc")), origin checkpoint $(jget origin.checkpoint <<<"$doc")"
avfs_json --vault shell-base ls /
echo "imported: $(jget entries.0.name <<<"$doc") $(jget entries.1.name <<<"$doc")"

# --- one fork per task: O(1) ------------------------------------------------
avfs_json vault fork shell-base shell-task
echo "forked $(jget source <<<"$doc") -> $(jget name <<<"$doc")"

# --- run a command through the proxy ----------------------------------------
# The envelope is printed whatever the command's exit code (which is also
# the process's): read result.state and result.exit_code from it.
avfs_json --vault shell-task proxy exec --shell "sed -i s/world/avfs/ src/greet.txt && echo 'todo: ship' > NOTES.md"
if [ "$(jget error <<<"$doc")" = FuseUnavailable ]; then
	echo "no FUSE here ($(jget hint <<<"$doc")): writing without the proxy"
	"$AVFS" --vault shell-task write /src/greet.txt 'hello, avfs'
	"$AVFS" --vault shell-task write /NOTES.md 'todo: ship'
	fuse=no
elif [ "$(jget result.state <<<"$doc")" = completed ]; then
	echo "run $(jget id <<<"$doc"): exit $(jget result.exit_code <<<"$doc"), $(jget result.changed_files <<<"$doc") changed"
	"$PYTHON" -S -c '
import json, sys
for c in json.load(sys.stdin)["result"]["changes"]:
    print("  %s %s" % (c["kind"], c["path"]))' <<<"$doc"
	fuse=yes
else
	echo "proxy exec failed (exit $code): $doc" >&2
	exit 1
fi

if [ "$fuse" = yes ]; then
	# A networked command is not run: exit 15, it awaits a person's approval.
	avfs_json --vault shell-task proxy exec -- curl https://example.com
	echo "curl: exit $code, $(jget result.state <<<"$doc")"

	# A command that names host paths is denied: exit 14, nothing ran.
	avfs_json --vault shell-task proxy exec -- cat /etc/passwd
	echo "cat /etc/passwd: exit $code, $(jget result.decision.action <<<"$doc")"

	# A run that goes wrong is undone in O(1) from its checkpoint.
	avfs_json --vault shell-task proxy exec -- rm -rf src
	run=$(jget id <<<"$doc")
	avfs_json proxy undo "$run"
	[ "$(jget run <<<"$doc")" = "$run" ] && echo "undid rm -rf src: exit $code"
fi

# --- review the task: the fork against its parent ----------------------------
avfs_json --vault shell-task checkpoint diff vault:shell-base vault:shell-task
echo "task vs base: $(jget summary <<<"$doc")"
echo "greet.txt: $("$AVFS" --vault shell-task cat /src/greet.txt)"

# --- the task's work as a git patch, applied to the repository -------------
"$AVFS" --vault shell-task diff vault:shell-base vault:shell-task --stat | tail -n 1
"$AVFS" --vault shell-task diff vault:shell-base vault:shell-task --patch > task.patch
grep -c '^diff --git' task.patch | sed 's/^/patch: /; s/$/ files/'
# git apply task.patch in "$repo" would do the same as avfs apply: FROM is
# the recorded origin, a host file edited since then is a conflict.
avfs_json --vault shell-task apply "$repo" --dry-run
echo "would apply to the repository: $(jget applied.0.path <<<"$doc") $(jget applied.1.path <<<"$doc"), conflicts $(jget conflicts <<<"$doc")"
avfs_json --vault shell-task apply "$repo"
echo "repository greet.txt: $(cat "$repo/src/greet.txt")"
rm -f task.patch

# --- or merged back into the base vault --------------------------------------
avfs_json vault merge shell-task --dry-run
echo "would merge into $(jget target <<<"$doc"): $(jget applied.0.path <<<"$doc"), conflicts $(jget conflicts <<<"$doc")"
avfs_json vault merge shell-task
echo "merged: $(jget merged <<<"$doc"); undo: avfs checkpoint restore --vault shell-base CHECKPOINT"
echo "base greet.txt: $("$AVFS" --vault shell-base cat /src/greet.txt)"

# --- errors are typed, with stable exit codes --------------------------------
avfs_json vault info no-such-vault
echo "no-such-vault: exit $code, $(jget error <<<"$doc")"
avfs_json vault delete shell-base
echo "delete without --yes: exit $code, $(jget error <<<"$doc")"
avfs_json vault delete shell-base --yes
echo "delete a vault with forks: exit $code, $(jget error <<<"$doc") ($(jget forks <<<"$doc"))"
