package toolsuite_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Real tools, run unchanged in a workspace, must produce what they
// produce on the native disk, and leave the vault the tree they leave
// there.

func TestGit(t *testing.T) {
	need(t, "git")
	onEach(t, func(t *testing.T, w *workspace) {
		// The index caches each file's inode number and times.
		sameOnNative(t, w, `
git init -q -b main repo
cd repo
mkdir -p src/pkg
for i in 1 2 3 4 5; do echo "line $i" > src/pkg/f$i.txt; done
echo '#!/bin/sh' > run.sh && chmod +x run.sh
ln -s src/pkg/f1.txt link
git add -A
git commit -q -m first
git branch feature
git checkout -q feature
echo changed >> src/pkg/f2.txt
git rm -q src/pkg/f3.txt
git commit -q -am second
git checkout -q main
git status --porcelain
git log --oneline --all | sort
git diff main feature --stat
git fsck --no-progress 2>&1
git gc -q
git count-objects -v | grep -v size
cat src/pkg/f2.txt
test -x run.sh && echo executable
readlink link
`, "repo/.git/index")
	})
}

func TestTar(t *testing.T) {
	need(t, "tar")
	// Build a tree on the native disk, archive it, extract it into the
	// workspace, archive it again from there: the listings must agree.
	src := t.TempDir()
	sh(t, src, `
mkdir -p tree/a/b tree/c
for i in $(seq 1 40); do printf 'file %s\n' $i > tree/a/b/f$i; done
head -c 300000 /dev/zero | tr '\0' 'x' > tree/c/big
ln -s ../c/big tree/a/lnk
ln tree/c/big tree/c/hard
chmod 600 tree/a/b/f1
touch -d 2020-01-02T03:04:05Z tree/a/b/f2
tar cf ../src.tar --sort=name tree
`)
	tarball := filepath.Join(filepath.Dir(src), "src.tar")
	onEach(t, func(t *testing.T, w *workspace) {
		sameOnNative(t, w, fmt.Sprintf(`
tar xf %s
tar cf out.tar --sort=name tree
tar tvf out.tar --numeric-owner --full-time | sort
cmp tree/c/big tree/c/hard && echo same
`, tarball))
	})
}

func TestPythonWriteRename(t *testing.T) {
	need(t, "python3")
	onEach(t, func(t *testing.T, w *workspace) {
		sameOnNative(t, w, `
python3 - <<'EOF'
import os, json
os.makedirs("out/tmp", exist_ok=True)
for i in range(50):
    tmp = f"out/tmp/{i}.json.tmp"
    with open(tmp, "w") as f:
        json.dump({"i": i, "pad": "x" * (i * 100)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, f"out/{i}.json")
with open("out/log", "a") as f:
    f.write("one\n")
with open("out/log", "a") as f:
    f.write("two\n")
total = sum(json.load(open(f"out/{i}.json"))["i"] for i in range(50))
print(total, sorted(os.listdir("out"))[:3], os.listdir("out/tmp"))
print(open("out/log").read(), end="")
os.rename("out", "renamed")
print(os.path.exists("out"), len(os.listdir("renamed")))
EOF
`)
	})
}

func TestSQLiteWAL(t *testing.T) {
	need(t, "sqlite3")
	onEach(t, func(t *testing.T, w *workspace) {
		script := `
sqlite3 db.sqlite <<'EOF'
PRAGMA journal_mode=WAL;
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000)
INSERT INTO t(v) SELECT printf('row %d', i) FROM n;
UPDATE t SET v = v || '!' WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
PRAGMA wal_checkpoint(TRUNCATE);
SELECT count(*), sum(length(v)) FROM t;
PRAGMA integrity_check;
EOF
`
		native := t.TempDir()
		got, want := sh(t, w.Dir, script), sh(t, native, script)
		if got != want {
			t.Errorf("sqlite3 differs\n--- workspace:\n%s\n--- native:\n%s", got, want)
		}
		if !strings.Contains(got, "wal") || !strings.Contains(got, "ok") {
			t.Errorf("unexpected output:\n%s", got)
		}
		// The database reads back from a new workspace of the vault, and
		// takes one more row there.
		w.reopen()
		more := `sqlite3 db.sqlite "INSERT INTO t(v) VALUES ('again'); SELECT count(*) FROM t; PRAGMA integrity_check;"`
		if out, want := sh(t, w.Dir, more), sh(t, native, more); out != want || !strings.Contains(out, "1820\nok") {
			t.Errorf("in a new workspace: %q, native %q", out, want)
		}
		w.sameTree(native)
	})
}

// TestLsDotEntries lists directories with ls -a, which shows the "." and
// ".." entries that readdir returns on a local disk.
func TestLsDotEntries(t *testing.T) {
	onEach(t, func(t *testing.T, w *workspace) {
		sameOnNative(t, w, `
mkdir -p d/e
touch d/f
ls -a
ls -a d d/e
`)
	})
}
