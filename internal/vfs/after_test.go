package vfs_test

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func readAfter(t *testing.T, v *vfs.Vault, checkpoint, p string) string {
	t.Helper()
	var out []byte
	err := vfs.StateRef{Vault: v, Checkpoint: checkpoint, After: true}.View(func(tx *vfs.Tx) (err error) {
		out, err = tx.ReadFile(p)
		return err
	})
	if errs.Is(err, errs.NotFound) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// The state after a checkpoint is the layer its save started: the working
// state while that layer is the top, its frozen content once the next
// checkpoint is saved, and still that after a restore of the checkpoint
// starts another layer on it.
func TestViewAfter(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/a", "before")
		if _, err := f.v.SaveCheckpoint("run1", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/a", "run1 wrote")
		if got := readAfter(t, f.v, "run1", "/a"); got != "run1 wrote" {
			t.Fatalf("after run1, still the top: a=%q", got)
		}
		if _, err := f.v.SaveCheckpoint("run2", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/a", "run2 wrote")
		f.write("/b", "new")
		if got, gotB := readAfter(t, f.v, "run1", "/a"), readAfter(t, f.v, "run1", "/b"); got != "run1 wrote" || gotB != "<missing>" {
			t.Fatalf("after run1, frozen: a=%q b=%q", got, gotB)
		}
		if got := readAfter(t, f.v, "run2", "/a"); got != "run2 wrote" {
			t.Fatalf("after run2: a=%q", got)
		}
		if err := f.v.RestoreCheckpoint("run1"); err != nil {
			t.Fatal(err)
		}
		f.write("/a", "after the undo")
		if got := readAfter(t, f.v, "run1", "/a"); got != "run1 wrote" {
			t.Fatalf("after run1, once run1 was restored: a=%q", got)
		}
		if err := f.v.DeleteCheckpoint("run2"); err != nil { // run1's layer has one child, unnamed
			t.Fatal(err)
		}
		if _, err := f.v.Compact(); err != nil {
			t.Fatal(err)
		}
		if got := readAfter(t, f.v, "run1", "/a"); got != "run1 wrote" {
			t.Fatalf("after run1, compacted: a=%q", got)
		}
		if got := readIn(t, f.v, "run1", "/a"); got != "before" {
			t.Fatalf("checkpoint run1 itself: a=%q", got)
		}
		err := vfs.StateRef{Vault: f.v, Checkpoint: "nope", After: true}.View(func(*vfs.Tx) error { return nil })
		if !errs.Is(err, errs.CheckpointNotFound) {
			t.Fatalf("after a missing checkpoint: %v", err)
		}
	})
}
