package fusefs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Real tools, run unchanged inside a mount, must produce what they produce
// on the native disk.

// sh runs a shell script in dir with a clean, fixed environment and
// returns its output.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C",
		"GIT_AUTHOR_NAME=avfs", "GIT_AUTHOR_EMAIL=avfs@example.com",
		"GIT_COMMITTER_NAME=avfs", "GIT_COMMITTER_EMAIL=avfs@example.com",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s:\n%s\n%v\n%s", dir, script, err, out)
	}
	return string(out)
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// sameOnNative runs script in a mount and on the native disk and compares
// the outputs.
func sameOnNative(t *testing.T, script string) {
	t.Helper()
	f := mountVault(t, "sqlite", false)
	native := t.TempDir()
	got := sh(t, f.Mnt, script)
	want := sh(t, native, script)
	if got != want {
		t.Errorf("mount and native disk differ\n--- mount:\n%s\n--- native:\n%s", got, want)
	}
}

func TestGit(t *testing.T) {
	need(t, "git")
	sameOnNative(t, `
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
cat src/pkg/f2.txt
test -x run.sh && echo executable
readlink link
`)
}

func TestTar(t *testing.T) {
	need(t, "tar")
	// Build a tree on the native disk, archive it, extract it into the
	// mount, archive it again from there: the listings must agree.
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
	f := mountVault(t, "sqlite", false)
	native := t.TempDir()
	script := fmt.Sprintf(`
tar xf %s
tar cf out.tar --sort=name tree
tar tvf out.tar --numeric-owner --full-time | sort
cmp tree/c/big tree/c/hard && echo same
`, tarball)
	got, want := sh(t, f.Mnt, script), sh(t, native, script)
	if got != want {
		t.Errorf("tar differs\n--- mount:\n%s\n--- native:\n%s", got, want)
	}
}

func TestPythonWriteRename(t *testing.T) {
	need(t, "python3")
	sameOnNative(t, `
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
}

func TestSQLiteWAL(t *testing.T) {
	need(t, "sqlite3")
	f := mountVault(t, "sqlite", false)
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
	got, want := sh(t, f.Mnt, script), sh(t, t.TempDir(), script)
	if got != want {
		t.Errorf("sqlite3 differs\n--- mount:\n%s\n--- native:\n%s", got, want)
	}
	if !strings.Contains(got, "wal") || !strings.Contains(got, "ok") {
		t.Errorf("unexpected output:\n%s", got)
	}
	// The database reads back the same after a remount. (Read-write: a
	// WAL database needs its -shm file, as on a read-only disk.)
	unmountEventually(t, f.S)
	g := mountOn(t, f.Home, f.Name, t.TempDir(), false)
	out := sh(t, g.Mnt, `sqlite3 db.sqlite 'SELECT count(*) FROM t;' 2>&1 || true`)
	if !bytes.Contains([]byte(out), []byte("1819")) {
		t.Errorf("after remount: %s", out)
	}
}
