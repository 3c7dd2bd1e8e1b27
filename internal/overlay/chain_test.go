//go:build linux

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestGone: what a lingering workspace's ingest removes after the upper
// dropped it: a removed name once, not what it held; nothing below a
// name that is now a file or a symlink (the ingest replaced it, and a
// path through a symlink leads elsewhere); nothing the upper still holds.
func TestGone(t *testing.T) {
	before := sigs(map[string]bool{"/d": true, "/d/f": false, "/d/e": true, "/d/e/g": false,
		"/s": true, "/s/x": false, "/k": true, "/k/y": false, "/k/z": false, "/w": false})
	now := sigs(map[string]bool{"/s": false, "/k": true, "/k/z": false, "/w": false})
	if got, want := gone(before, now), []string{"/d", "/k/y"}; !slices.Equal(got, want) {
		t.Errorf("gone: %v, want %v", got, want)
	}
}

// sigs is the stat data of paths mapped to whether each is a directory.
func sigs(dirs map[string]bool) map[string]sig {
	out := map[string]sig{}
	for p, d := range dirs {
		out[p] = sig{mode: unix.S_IFREG}
		if d {
			out[p] = sig{mode: unix.S_IFDIR}
		}
	}
	return out
}

// TestPersistOntoOpaqueDir: a lingering workspace's second ingest of an
// upper holding an opaque dir (`rm -rf d && mkdir d` over a lower d)
// keeps what the first ingest took into d. The opaque dir empties the
// vault's d at each ingest; names below it whose stat data did not change
// must be written again, not left as the state held them.
func TestPersistOntoOpaqueDir(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "d", "old"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	importDir(t, v, src)
	run, err := c.Start(context.Background(), v, "opaque", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Discard() })
	m := func(s string) string { return filepath.Join(run.Merged, s) }
	if err := os.RemoveAll(m("d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m("d/new"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run.PersistOnto(v); err != nil {
		t.Fatal(err)
	}
	time.Sleep(racyWindow + 10*time.Millisecond)
	// Two more ingests, each after a change elsewhere: the first finds
	// d/new's stat data of the first ingest racy, the second trusts it.
	for _, name := range []string{"other", "another"} {
		if err := os.WriteFile(m(name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := run.PersistOnto(v); err != nil {
			t.Fatal(err)
		}
		time.Sleep(racyWindow + 10*time.Millisecond)
	}
	for p, want := range map[string]string{"/d/new": "new", "/other": "x", "/another": "x", "/d/old": "<missing>"} {
		var got string
		err := v.View(func(tx *vfs.Tx) error {
			b, err := tx.ReadFile(p)
			got = string(b)
			return err
		})
		if errs.Is(err, errs.NotFound) {
			got = "<missing>"
		} else if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s after the second ingest: %q, want %q", p, got, want)
		}
	}
}
