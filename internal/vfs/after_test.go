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

// RestoreAfter brings back the sealed state after a checkpoint only onto
// the checkpoint's own state: after a restore of it, through a compaction,
// and not once anything was written since.
func TestRestoreAfter(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/a", "before")
		if _, err := f.v.SaveCheckpoint("run", ""); err != nil {
			t.Fatal(err)
		}
		if err := f.v.RestoreAfter("run"); !errs.Is(err, errs.NotFound) {
			t.Fatalf("RestoreAfter of an unsealed state: %v", err)
		}
		f.write("/a", "the run wrote")
		f.write("/b", "new")
		if err := f.v.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := f.v.RestoreAfter("run"); !errs.Is(err, errs.Conflict) {
			t.Fatalf("RestoreAfter onto the run's own after state: %v", err)
		}
		if err := f.v.RestoreCheckpoint("run"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.v.Compact(); err != nil {
			t.Fatal(err)
		}
		if err := f.v.RestoreAfter("run"); err != nil {
			t.Fatal(err)
		}
		if a, b := f.read("/a"), f.read("/b"); a != "the run wrote" || b != "new" {
			t.Fatalf("after RestoreAfter: a=%q b=%q", a, b)
		}
		if err := f.v.RestoreCheckpoint("run"); err != nil {
			t.Fatal(err)
		}
		f.write("/c", "moved on")
		if err := f.v.RestoreAfter("run"); !errs.Is(err, errs.Conflict) {
			t.Fatalf("RestoreAfter after a write: %v", err)
		}
		if a, c := f.read("/a"), f.read("/c"); a != "before" || c != "moved on" {
			t.Fatalf("a refused RestoreAfter changed the state: a=%q c=%q", a, c)
		}
	})
}
