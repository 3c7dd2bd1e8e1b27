//go:build linux

package overlay

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// sampleTree writes one of everything a layer must carry into dir.
func sampleTree(t testing.TB, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(s string) string { return filepath.Join(dir, s) }
	must(os.MkdirAll(p("src/deep/er"), 0o755))
	must(os.MkdirAll(p("gone/sub"), 0o750))
	must(os.WriteFile(p("src/a.txt"), []byte("hello\n"), 0o644))
	must(os.WriteFile(p("src/deep/er/b"), []byte("b"), 0o600))
	must(os.WriteFile(p("gone/sub/x"), []byte("x"), 0o644))
	big := make([]byte, 20*vfs.ChunkSize+123)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	must(os.WriteFile(p("big.bin"), big, 0o644))
	must(os.WriteFile(p("exec.sh"), []byte("#!/bin/sh\n"), 0o4755))
	must(os.Symlink("src/a.txt", p("link")))
	must(os.Symlink("/nowhere", p("dangling")))
	must(os.Link(p("src/a.txt"), p("hard")))
	must(unix.Mkfifo(p("fifo"), 0o640))
	must(unix.Mknod(p("null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(unix.Lsetxattr(p("src/a.txt"), "user.tag", []byte("v1"), 0))
	must(unix.Lsetxattr(p("src"), "user.dir", []byte{}, 0))
	must(os.Lchown(p("src/deep/er/b"), 1234, 5678))
	must(os.Lchown(p("link"), 42, 43))
	old := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	must(os.Chtimes(p("src/deep/er/b"), old, old))
}

func TestMaterializeKeepsEverything(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	got := materializeTo(t, v)
	want := snapshot(t, src, snapOpts{times: true})
	if d := diffLines(want, snapshot(t, got, snapOpts{times: true})); d != "" {
		t.Fatalf("materialized tree differs from its source:\n%s", d)
	}
}

func newCache(t testing.TB, l Layout) *Cache {
	root := filepath.Join(t.TempDir(), "layers")
	c := &Cache{Root: root, Format: Trusted, Layout: l}
	t.Cleanup(func() {
		if m := mountsUnder(root); len(m) > 0 {
			t.Errorf("mounts left behind: %v", m)
			for _, p := range m {
				_ = unix.Unmount(p, unix.MNT_DETACH)
			}
		}
	})
	return c
}

// TestRunRoundTrip runs the changes a command makes on an overlay over a
// vault's checkpoint, ingests them, and checks the vault then holds what
// the mount showed; a second run stands on the first run's upper dir and
// materializes nothing. Past MaxDepth deltas the deltas are merged into
// one over the base (twice, the second time with a merged delta among
// them), and a stack whose deltas hold more names than its base is
// squashed from the vault.
func TestRunRoundTrip(t *testing.T) { forLayouts(t, testRunRoundTrip) }

func testRunRoundTrip(t *testing.T, l Layout) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, l)
	c.MaxDepth = 2
	src := t.TempDir()
	sampleTree(t, src)
	// A base of more names than the first deltas hold, so that they are
	// merged, not squashed.
	if err := os.Mkdir(filepath.Join(src, "bulk"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(src, "bulk", fmt.Sprint(i)), []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	importDir(t, v, src)

	for round := range 8 {
		cp := "cp" + string(rune('0'+round))
		if _, err := v.SaveCheckpoint(cp, ""); err != nil {
			t.Fatal(err)
		}
		run, err := c.Start(context.Background(), v, cp, "")
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 && (!run.Prepared.Built || len(run.Prepared.Lowers) != 1) {
			t.Fatalf("first run: built %v with %d lowers, want a base built", run.Prepared.Built, len(run.Prepared.Lowers))
		}
		if (round == 1 || round == 2) && (run.Prepared.Built || len(run.Prepared.Lowers) != round+1) {
			t.Fatalf("run %d: built %v with %d lowers, want the earlier uppers reused", round, run.Prepared.Built, len(run.Prepared.Lowers))
		}
		want := map[int]struct {
			built  bool
			lowers int
		}{3: {true, 2}, 4: {false, 3}, 5: {true, 2}, 6: {false, 3}, 7: {true, 1}}
		if w, ok := want[round]; ok && (run.Prepared.Built != w.built || len(run.Prepared.Lowers) != w.lowers) {
			t.Fatalf("run %d: built %v with %d lowers, want built %v with %d", round, run.Prepared.Built, len(run.Prepared.Lowers), w.built, w.lowers)
		}
		m := func(s string) string { return filepath.Join(run.Merged, s) }
		must := func(err error) {
			t.Helper()
			if err != nil {
				run.Discard()
				t.Fatal(err)
			}
		}
		switch round {
		case 0:
			must(os.RemoveAll(m("gone")))     // a whiteout
			must(os.RemoveAll(m("src/deep"))) // rm -rf then mkdir: an opaque dir
			must(os.MkdirAll(m("src/deep/new"), 0o700))
			must(os.WriteFile(m("src/deep/new/f"), []byte("new"), 0o644))
			must(os.Chmod(m("exec.sh"), 0o700)) // metadata only
			must(unix.Lsetxattr(m("src/a.txt"), "user.tag", []byte("v2"), 0))
			f, err := os.OpenFile(m("big.bin"), os.O_RDWR, 0)
			must(err)
			_, err = f.WriteAt([]byte("edited"), 5*vfs.ChunkSize+7)
			must(err)
			must(f.Close())
			must(os.Link(m("exec.sh"), m("exec2")))
		case 1:
			must(os.Rename(m("src/a.txt"), m("moved.txt")))
			must(os.Remove(m("null")))
			must(os.Symlink("moved.txt", m("null")))
			must(os.Truncate(m("big.bin"), 3*vfs.ChunkSize))
			// A directory of a lower layer cannot be renamed without
			// redirect_dir: the program copies it (mv does).
			if err := os.Rename(m("src/deep"), m("deep2")); !errorsIsEXDEV(err) {
				must(err)
			}
		case 2:
			must(os.WriteFile(m("hard"), []byte("rewritten through one name"), 0o644))
			must(os.RemoveAll(m("src")))
		case 3:
			must(os.WriteFile(m("after-squash"), []byte("s"), 0o600))
			must(os.Remove(m("fifo")))    // a name of the base, through the merged delta
			must(os.RemoveAll(m("bulk"))) // an opaque dir, below a delta that keeps it open
			must(os.Mkdir(m("bulk"), 0o755))
			must(os.WriteFile(m("bulk/new"), []byte("n"), 0o644))
			must(os.MkdirAll(m("d3/sub"), 0o755))
			must(os.WriteFile(m("d3/sub/f"), []byte("f"), 0o644))
		case 4:
			must(os.MkdirAll(m("src/again"), 0o755)) // over the whiteout of round 2
			must(os.WriteFile(m("src/again/f"), []byte("f"), 0o644))
			must(os.Chmod(m("d3"), 0o711)) // a dir's attributes: its names below still show
			must(os.WriteFile(m("d3/new"), []byte("n"), 0o644))
			must(os.WriteFile(m("bulk/new2"), []byte("n"), 0o644))
			must(os.Remove(m("after-squash")))
		case 5: // more names than the base holds
			must(os.Mkdir(m("many"), 0o755))
			for i := range 150 {
				must(os.WriteFile(m(fmt.Sprintf("many/f%d", i)), []byte("m"), 0o644))
			}
		case 6:
			must(os.WriteFile(m("many/f1"), []byte("rewritten"), 0o644))
			must(os.RemoveAll(m("src")))
		case 7:
			must(os.WriteFile(m("after-the-squash"), []byte("s"), 0o600))
		}
		before := snapshot(t, run.Merged, snapOpts{times: true})
		fin, err := run.Finish(v)
		if err != nil {
			t.Fatal(err)
		}
		if !fin.Adopted {
			t.Fatalf("run %d: the upper was not adopted (sealed %+v)", round, fin.Sealed)
		}
		if _, err := os.Stat(run.Dir); !os.IsNotExist(err) {
			t.Fatalf("run dir left: %v", err)
		}
		got := snapshot(t, materializeTo(t, v), snapOpts{times: true})
		if d := diffLines(before, got); d != "" {
			t.Fatalf("run %d: the vault after the ingest differs from the mount:\n%s", round, d)
		}
		checkFsck(t, v)
	}
}

func errorsIsEXDEV(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("cross-device"))
}

// TestIngestStoresOnlyChangedChunks: an edit of one chunk of a copied-up
// file stores one new chunk, not the file's twenty.
func TestIngestStoresOnlyChangedChunks(t *testing.T) {
	forLayouts(t, testIngestStoresOnlyChangedChunks)
}

func testIngestStoresOnlyChangedChunks(t *testing.T, l Layout) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, l)
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	chunks := func() int {
		r, err := v.Fsck()
		if err != nil {
			t.Fatal(err)
		}
		return r.Chunks
	}
	n0 := chunks()
	if _, err := v.SaveCheckpoint("cp", ""); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(context.Background(), v, "r", "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(run.Merged, "big.bin"), os.O_RDWR, 0)
	if err == nil {
		_, err = f.WriteAt([]byte("x"), 7*vfs.ChunkSize)
		f.Close()
	}
	if err != nil {
		run.Discard()
		t.Fatal(err)
	}
	if _, err := run.Finish(v); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != n0+1 {
		t.Fatalf("chunks %d → %d; want one new chunk", n0, n)
	}
}

// TestIngestOverQuotaChangesNothing: a run that wrote past the vault's
// size limit is refused whole with QuotaExceeded.
func TestIngestOverQuotaChangesNothing(t *testing.T) {
	forLayouts(t, testIngestOverQuotaChangesNothing)
}

func testIngestOverQuotaChangesNothing(t *testing.T, l Layout) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{MaxSizeMB: 2})
	c := newCache(t, l)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	importDir(t, v, src)
	want := snapshot(t, materializeTo(t, v), snapOpts{times: true})
	if _, err := v.SaveCheckpoint("cp", ""); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(context.Background(), v, "r", "")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{7}, 3<<20)
	_ = os.WriteFile(filepath.Join(run.Merged, "small"), []byte("s"), 0o644)
	_ = os.Remove(filepath.Join(run.Merged, "keep"))
	if err := os.WriteFile(filepath.Join(run.Merged, "big"), big, 0o644); err != nil {
		run.Discard()
		t.Fatal(err)
	}
	_, err = run.Finish(v)
	if !errs.Is(err, errs.QuotaExceeded) {
		t.Fatalf("ingest over quota: %v, want QuotaExceeded", err)
	}
	if d := diffLines(want, snapshot(t, materializeTo(t, v), snapOpts{times: true})); d != "" {
		t.Fatalf("a refused ingest changed the vault:\n%s", d)
	}
	if _, err := os.Stat(run.Dir); !os.IsNotExist(err) {
		t.Fatalf("run dir left: %v", err)
	}
}

// TestRunUnmountedDuringItFails: a run whose workspace was unmounted
// under it (its later writes went to the host dir beneath) ends with an
// error, its upper still ingested.
func TestRunUnmountedDuringItFails(t *testing.T) { forLayouts(t, testRunUnmountedDuringItFails) }

func testRunUnmountedDuringItFails(t *testing.T, l Layout) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, l)
	run, err := c.Start(context.Background(), v, "r", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run.Merged, "before"), []byte("b"), 0o644); err != nil {
		run.Discard()
		t.Fatal(err)
	}
	if err := unix.Unmount(run.Merged, unix.MNT_DETACH); err != nil {
		run.Discard()
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(run.Merged, "after"), []byte("a"), 0o644)
	if _, err := run.Finish(v); !errs.Is(err, errs.IoError) {
		t.Fatalf("Finish after the workspace was unmounted: %v, want IoError", err)
	}
	if err := v.View(func(tx *vfs.Tx) error { _, err := tx.ReadFile("/before"); return err }); err != nil {
		t.Errorf("what the run wrote before: %v", err)
	}
}
