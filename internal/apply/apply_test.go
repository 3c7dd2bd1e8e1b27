package apply_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/apply"
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestApplyStopsAndOrigin: a vault without a recorded origin has no
// default FROM (NotFound); an ended ctx writes nothing (Interrupted); a
// live one writes the changes, never through a host symlink.
func TestApplyStopsAndOrigin(t *testing.T) {
	h, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("v", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.SaveCheckpoint("start", ""); err != nil {
		t.Fatal(err)
	}
	if err := v.Update(func(tx *vfs.Tx) error {
		if _, err := tx.MkdirAll("/sub", 0o755); err != nil {
			return err
		}
		_, err := tx.WriteFile("/sub/f.txt", []byte("f\n"), 0o644)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r := refs.NewResolver(h, func() (string, error) { return "v", nil })
	defer r.Close()
	if _, err := apply.Origin(r); !errs.Is(err, errs.NotFound) {
		t.Fatalf("Origin of a vault without one: %v", err)
	}
	from, err := r.Resolve("start")
	if err != nil {
		t.Fatal(err)
	}
	to, err := r.Resolve(refs.Working)
	if err != nil {
		t.Fatal(err)
	}

	host := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := apply.Apply(ctx, host, from, to, apply.Options{}); !errs.Is(err, errs.Interrupted) {
		t.Fatalf("Apply with an ended ctx: %v", err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Fatalf("an interrupted apply wrote %v", ents)
	}

	// sub is a symlink out of the host directory: apply does not follow it.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(host, "sub")); err != nil {
		t.Fatal(err)
	}
	res, err := apply.Apply(context.Background(), host, from, to, apply.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) == 0 {
		t.Errorf("a path through a host symlink is no conflict: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(outside, "f.txt")); !os.IsNotExist(err) {
		t.Errorf("apply wrote through the symlink: %v", err)
	}
}
