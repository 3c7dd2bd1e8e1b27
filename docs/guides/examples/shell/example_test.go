// Package shell_test runs the shell guide's example script.
package shell_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/docs/guides/examples/internal/guidetest"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
)

// TestExample runs example.sh with the avfs program built from this
// checkout first on PATH, in a fresh AVFS_HOME, and checks what it prints
// and that it deleted its vaults. Without root or FUSE the script takes its
// no-FUSE branch.
func TestExample(t *testing.T) {
	for _, tool := range []string{"bash", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	fuse := mountd.Available() == nil
	if fuse && os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "avfs"), "github.com/agentvfs/agentvfs/cmd/avfs")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building avfs: %v\n%s", err, out)
	}
	home := t.TempDir()
	cmd := exec.Command("bash", "example.sh")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AVFS_HOME="+home, "AVFS_VAULT=", "AVFS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example.sh: %v\n%s", err, out)
	}
	got := regexp.MustCompile(`run \d{8}T[0-9.]+-[0-9a-f]+:`).ReplaceAllString(string(out), "run ID:")

	want := []string{
		"created shell-base (sqlite)",
		"checkpoint imported: 2 files",
		"forked shell-base -> shell-task",
		`task vs base: {"added": 1, "deleted": 0, "mode_changed": 0, "modified": 1, "type_changed": 0}`,
		"greet.txt: hello, avfs",
		" 2 files changed, 2 insertions(+), 1 deletion(-)",
		"would merge into shell-base: /NOTES.md, conflicts []",
		"merged: true; undo",
		"base greet.txt: hello, avfs",
		"no-such-vault: exit 3, VaultNotFound",
		"delete without --yes: exit 9, VaultHasForks",
		`delete a vault with forks: exit 9, VaultHasForks (["shell-task"])`,
	}
	if fuse {
		want = append(want,
			"run ID: exit 0, 2 changed\n  added /NOTES.md\n  modified /src/greet.txt",
			"curl: exit 15, awaiting_approval",
			"cat /etc/passwd: exit 14, deny",
			"undid rm -rf src: exit 0")
	} else {
		want = append(want, "no FUSE here")
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("the output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("example.sh printed:\n%s", got)
	}
	if left := mountrec.AvfsMountsUnder(home); len(left) > 0 {
		t.Errorf("mounts left behind: %v", left)
	}
	if files, _ := filepath.Glob(filepath.Join(home, "vaults", "*.avfs")); len(files) > 0 {
		t.Errorf("vaults left behind: %v", files)
	}
}

// TestGuideSnippets checks that every bash block of the guide is part of
// this example, so the guide shows code that runs.
func TestGuideSnippets(t *testing.T) {
	guidetest.Snippets(t, "../../shell.md", "example.sh", "bash")
}
