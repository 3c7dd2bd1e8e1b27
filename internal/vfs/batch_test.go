package vfs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestBatch checks a batch on SQLite: a failed step (here one refused by
// a quota after it wrote) is undone alone, the batch's reads see its
// steps, others see the last commit, and Commit and Rollback keep or drop
// everything, leaving a vault that passes fsck.
func TestBatch(t *testing.T) {
	f := newVault(t, "sqlite")
	f.update(func(tx *vfs.Tx) error { return tx.SetQuota(vfs.Quota{MaxFiles: 3}) })
	f.write("/before", "0")

	b, err := f.v.Batch()
	if err != nil {
		t.Fatal(err)
	}
	step := func(p string) error {
		return b.Update(func(tx *vfs.Tx) error {
			_, err := tx.WriteFile(p, []byte(p), 0o644)
			return err
		})
	}
	if err := step("/a"); err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *vfs.Tx) error {
		if _, err := tx.WriteFile("/b", []byte("b"), 0o644); err != nil {
			return err
		}
		_, err := tx.WriteFile("/c", []byte("c"), 0o644) // the fourth file
		return err
	})
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("a step over the quota: %v, want EDQUOT", err)
	}
	exists := func(view func(func(*vfs.Tx) error) error, p string) bool {
		var found bool
		if err := view(func(tx *vfs.Tx) error {
			_, err := tx.Resolve(p, false)
			found = err == nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}
	if !exists(b.View, "/a") || exists(b.View, "/b") {
		t.Error("inside the batch: want /a and not /b (its step failed)")
	}
	if exists(f.v.View, "/a") {
		t.Error("outside the batch, /a is visible before the commit")
	}
	var files int64
	if err := b.View(func(tx *vfs.Tx) error {
		u, err := tx.Usage()
		files = u.Files
		return err
	}); err != nil || files != 2 {
		t.Errorf("usage inside the batch: %d files (%v), want 2", files, err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := f.read("/a"); got != "/a" {
		t.Errorf("after commit /a = %q", got)
	}
	if err := b.Update(func(*vfs.Tx) error { return nil }); err == nil {
		t.Error("a step after Commit succeeded")
	}

	b, err = f.v.Batch()
	if err != nil {
		t.Fatal(err)
	}
	if err := step("/gone"); err != nil {
		t.Fatal(err)
	}
	if err := b.Rollback(); err != nil {
		t.Fatal(err)
	}
	if exists(f.v.View, "/gone") {
		t.Error("/gone survived the rollback")
	}
	f.write("/after", "1") // the write lock was given back
}

func TestBatchUnsupported(t *testing.T) {
	v, err := vfs.Create(engines.NewMemory(), "mem", vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Batch(); !errors.Is(err, kv.ErrNoBatch) {
		t.Errorf("Batch on the memory engine: %v, want kv.ErrNoBatch", err)
	}
}
