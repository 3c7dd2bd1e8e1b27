package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/docs/guides/examples/internal/guidetest"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
)

// TestExample runs the guide's example against a fresh home, with the
// avfs program built from this checkout first on PATH, and checks what it
// prints. Without root or FUSE it runs with -no-exec.
func TestExample(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "avfs"), "github.com/agentvfs/agentvfs/cmd/avfs")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building avfs: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("AGENTVFS_BIN", "")
	home := t.TempDir()
	execute := os.Geteuid() == 0 && mountd.Available() == nil

	var out bytes.Buffer
	if err := run(context.Background(), &out, home, execute); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `task vs base:
  added /NOTES.md (0 -> 11 bytes)
  modified /src/greet.txt (13 -> 12 bytes)
greet.txt: hello, avfs
no-such-vault: VaultNotFound
`
	if execute {
		want = `run completed: exit 0, 2 changed
  added /NOTES.md
  modified /src/greet.txt
curl: awaiting_approval (require_approval)
undid "rm -rf src"
mounted read-only: src/greet.txt
` + want
	}
	if got := out.String(); got != want {
		t.Errorf("the example printed\n%s\nwant\n%s", got, want)
	}
	if left := mountrec.AvfsMountsUnder(home); len(left) > 0 {
		t.Errorf("mounts left behind: %v", left)
	}
	// It cleans up after itself.
	if b, _ := filepath.Glob(filepath.Join(home, "vaults", "*")); len(b) > 0 {
		t.Errorf("vault files left behind: %v", b)
	}
}

// TestGuideSnippets checks that every Go block of the guide is part of
// this example, so the guide shows code that runs.
func TestGuideSnippets(t *testing.T) {
	guidetest.Snippets(t, "../../go.md", "main.go", "go")
}
