package vfs_test

import (
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func sharedVault(t *testing.T, dsn, table string) *vfs.Vault {
	t.Helper()
	eng, err := postgres.Create(dsn, &postgres.Options{Table: table, Shared: &postgres.Shared{Prefix: vfs.ChunkPrefix, Table: "chunks"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vfs.Create(eng, table, vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func put(t *testing.T, v *vfs.Vault, p, data string) {
	t.Helper()
	if err := v.Update(func(tx *vfs.Tx) error { _, err := tx.WriteFile(p, []byte(data), 0o644); return err }); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, v *vfs.Vault, p string) string {
	t.Helper()
	var b []byte
	if err := v.View(func(tx *vfs.Tx) (err error) { b, err = tx.ReadFile(p); return err }); err != nil {
		t.Fatalf("read %s of %s: %v", p, v.Name(), err)
	}
	return string(b)
}

// TestSharedGCRaced: a write in another vault that maps chunks a
// collection of the shared space found dead, between its mark and its
// sweep, stops the sweep: nothing it maps is freed.
func TestSharedGCRaced(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := sharedVault(t, dsn, "a"), sharedVault(t, dsn, "b")
	x := strings.Repeat("x", 3*vfs.ChunkSize+17)
	put(t, a, "/a", x)
	put(t, a, "/a", "overwritten") // x's chunks are garbage now
	if _, err := a.GC(); err != nil {
		t.Fatal(err)
	}
	raced := false
	defer vfs.SetGCAfterMark(func() {
		if !raced {
			raced = true
			put(t, b, "/b", x) // finds them stored and maps them again
		}
	})()
	st, err := vfs.CollectShared([]*vfs.Vault{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the collection never reached its sweep")
	}
	if got := get(t, b, "/b"); got != x {
		t.Fatalf("/b reads %d bytes after the collection (%+v), want %d", len(got), st, len(x))
	}
	if _, err := vfs.CollectShared([]*vfs.Vault{a, b}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, b, "/b"); got != x {
		t.Fatalf("/b after a second collection: %d bytes", len(got))
	}
	for _, v := range []*vfs.Vault{a, b} {
		r, err := v.Fsck()
		if err != nil || len(r.Problems) > 0 {
			t.Fatalf("fsck %s: %v %v", v.Name(), err, r.Problems)
		}
	}
	// Freed once nothing maps them.
	put(t, b, "/b", "")
	st, err = vfs.CollectShared([]*vfs.Vault{a, b})
	if err != nil || st.ChunksFreed == 0 {
		t.Fatalf("collection after the last map went: %+v %v", st, err)
	}
}
