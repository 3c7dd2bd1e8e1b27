package vfs_test

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestStateRefCheck: the check every diff makes first (the CLI, the
// library, refs) finds the states that exist and names the one that does
// not.
func TestStateRefCheck(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		for _, r := range []vfs.StateRef{{Vault: f.v}, {Vault: f.v, Checkpoint: "cp"}, {Vault: f.v, Checkpoint: "cp", After: true}} {
			if err := r.Check(); err != nil {
				t.Errorf("%+v: %v", r, err)
			}
		}
		err := vfs.StateRef{Vault: f.v, Checkpoint: "nope", After: true}.Check()
		if !errs.Is(err, errs.CheckpointNotFound) {
			t.Errorf("a missing checkpoint: %v", err)
		}
	})
}
