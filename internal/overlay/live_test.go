//go:build linux

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// liveRun is a run over v whose working state is first persisted, then
// frozen by a checkpoint (as `avfs checkpoint save` does beside a live
// overlay mount), and then written again: a file created and deleted
// between the two leaves no trace in the upper, so only an ingest over
// the base again gets it right.
func liveRun(t *testing.T, v *vfs.Vault, c *Cache) (*Run, []string) {
	t.Helper()
	run, err := c.Start(context.Background(), v, "live", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Discard() })
	m := func(s string) string { return filepath.Join(run.Merged, s) }
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(m(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("first", "1")
	write("transient", "t")
	if err := run.Persist(v); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint("live-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m("transient")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(m("gone")); err != nil {
		t.Fatal(err)
	}
	write("second", "2")
	if err := run.Persist(v); err != nil {
		t.Fatalf("persist after a checkpoint froze the last one: %v", err)
	}
	if _, err := v.SaveCheckpoint("live-2", ""); err != nil {
		t.Fatal(err)
	}
	write("third", "3")
	return run, snapshot(t, run.Merged, snapOpts{})
}

// TestPersistAcrossCheckpoints: checkpoints saved while a run lives hold
// what it had written, and the final ingest holds exactly what the mount
// shows.
func TestPersistAcrossCheckpoints(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	run, want := liveRun(t, v, c)
	if _, err := run.Finish(v); err != nil {
		t.Fatal(err)
	}
	if d := diffLines(want, snapshot(t, materializeTo(t, v), snapOpts{})); d != "" {
		t.Fatalf("the vault differs from the mount:\n%s", d)
	}
	if err := v.ViewAt("live-1", func(tx *vfs.Tx) error {
		_, err := tx.Lookup(vfs.RootIno, "transient")
		return err
	}); err != nil {
		t.Fatalf("checkpoint live-1 lost what was persisted before it: %v", err)
	}
}

// TestRecoverAfterCheckpoint: a run killed after a checkpoint froze its
// last persist is still pending, and Recover ingests all of it.
func TestRecoverAfterCheckpoint(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	run, want := liveRun(t, v, c)
	// The process dies: the kernel keeps the overlay; nothing ingests.
	rec, err := c.Recover(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || !rec[0].Ingested || rec[0].Err != nil {
		t.Fatalf("recovered %+v", rec)
	}
	run.mounted = false // Recover unmounted it
	if d := diffLines(want, snapshot(t, materializeTo(t, v), snapOpts{})); d != "" {
		t.Fatalf("the vault differs from the mount:\n%s", d)
	}
}

// TestPersistSkipsUnchangedUpper: a Persist of an upper unchanged since
// the last one ingests nothing (the working state's layer stays), and a
// same-size rewrite is still seen.
func TestPersistSkipsUnchangedUpper(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	importDir(t, v, t.TempDir())
	run, err := c.Start(context.Background(), v, "skip", "")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Discard()
	f := filepath.Join(run.Merged, "f")
	top := func() uint64 {
		t.Helper()
		ls, err := v.StateLayers("")
		if err != nil {
			t.Fatal(err)
		}
		return ls[0].Layer
	}
	read := func() string {
		t.Helper()
		var b []byte
		if err := v.View(func(tx *vfs.Tx) error {
			a, err := tx.Lookup(vfs.RootIno, "f")
			if err != nil {
				return err
			}
			b = make([]byte, a.Size)
			_, err = tx.Read(a.Ino, 0, b)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := os.WriteFile(f, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * racyWindow) // past the racy window: the walk is trusted
	if err := run.Persist(v); err != nil {
		t.Fatal(err)
	}
	first := top()
	if err := run.Persist(v); err != nil {
		t.Fatal(err)
	}
	if got := top(); got != first {
		t.Fatalf("an unchanged upper was ingested again: top %d, was %d", got, first)
	}
	if err := os.WriteFile(f, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run.Persist(v); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "two" {
		t.Fatalf("after a same-size rewrite the vault holds %q", got)
	}
}

// TestDetachedUpperNotAdopted: a run whose overlay had to be detached
// (a file in it still open) is ingested, but its upper, which that file
// may still write to, does not become a cached layer.
func TestDetachedUpperNotAdopted(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	importDir(t, v, t.TempDir())
	run, err := c.Start(context.Background(), v, "busy", "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(run.Merged, "open"))
	if err != nil {
		run.Discard()
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("before"); err != nil {
		t.Fatal(err)
	}
	fin, err := run.Finish(v)
	if err != nil {
		t.Fatal(err)
	}
	if fin.Adopted {
		t.Fatal("the upper of a detached overlay was adopted as a cached layer")
	}
	if _, err := f.WriteString(" after"); err != nil {
		t.Fatal(err)
	}
	ents, err := c.Entries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Key == Key(v.ID(), fin.Sealed.Layer) {
			t.Fatalf("the run's layer %d is cached from the detached upper", fin.Sealed.Layer)
		}
	}
}

// TestUnchangedUpperAcrossCheckpoints: checkpoints saved one after the
// other beside an upper that does not change (each read persists first)
// leave the run able to ingest: an unchanged upper is ingested again
// once a checkpoint froze its layer.
func TestUnchangedUpperAcrossCheckpoints(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	importDir(t, v, t.TempDir())
	run, err := c.Start(context.Background(), v, "still", "")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Discard()
	if err := os.WriteFile(filepath.Join(run.Merged, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * racyWindow)
	for _, cp := range []string{"a", "b", "c"} {
		if err := run.Persist(v); err != nil {
			t.Fatalf("persist before checkpoint %s: %v", cp, err)
		}
		if _, err := v.SaveCheckpoint(cp, ""); err != nil {
			t.Fatal(err)
		}
	}
	want := snapshot(t, run.Merged, snapOpts{})
	if _, err := run.Finish(v); err != nil {
		t.Fatal(err)
	}
	if d := diffLines(want, snapshot(t, materializeTo(t, v), snapOpts{})); d != "" {
		t.Fatalf("the vault differs from the mount:\n%s", d)
	}
}
