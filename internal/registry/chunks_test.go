package registry_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// chunkRows counts the chunks of the store's shared space.
func chunkRows(t *testing.T, dsn string) int {
	t.Helper()
	n, err := pgtest.Get(t).QueryInt(dbName(dsn), `SELECT count(*) FROM avfs_pairs p JOIN avfs_stores s ON s.id = p.store WHERE s.name = 'avfs_chunks' AND length(k) = 33`)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func fsckClean(t *testing.T, v *vfs.Vault) {
	t.Helper()
	r, err := v.Fsck()
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("fsck of %s: %v %v", v.Name(), err, r)
	}
}

// TestStoreSharedChunks: the vaults of a store, made by two homes, share
// one chunk space: identical content is stored once, a fork copies
// nothing, and a collection run from one home on one vault never frees a
// chunk that another vault (of another home) still names; it frees them
// once no vault does.
func TestStoreSharedChunks(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := storeHome(t, dsn), storeHome(t, dsn)
	data := make([]byte, 4*vfs.ChunkSize)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	one, err := a.Create("one", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	writeFile(t, one, "/big", string(data))
	if n := chunkRows(t, dsn); n != 4 {
		t.Fatalf("%d chunks stored for 4 chunks of data", n)
	}
	two, err := b.Create("two", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	writeFile(t, two, "/same", string(data))
	if n := chunkRows(t, dsn); n != 4 {
		t.Fatalf("identical content in another vault: %d chunks, want the same 4", n)
	}
	fork, err := b.Fork("one", "f")
	if err != nil {
		t.Fatal(err)
	}
	if err := fork.Update(func(tx *vfs.Tx) error {
		ino, err := tx.Resolve("/big", true)
		if err != nil {
			return err
		}
		cp, err := tx.WriteFile("/copy", nil, 0o644)
		if err != nil {
			return err
		}
		return tx.CopyData(ino.Ino, cp.Ino)
	}); err != nil {
		t.Fatal(err)
	}
	fork.Close()
	if n := chunkRows(t, dsn); n != 4 {
		t.Fatalf("a fork's copy of its parent's file: %d chunks, want the same 4", n)
	}

	// b's vault lets go of the content, and b collects: a's vault still
	// names every chunk.
	if err := two.Update(func(tx *vfs.Tx) error { _, err := tx.Remove("/same", false, false); return err }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Compact("two"); err != nil {
		t.Fatal(err)
	}
	st, err := b.GC(two)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksFreed != 0 || chunkRows(t, dsn) != 4 {
		t.Fatalf("gc of vault two freed %d chunks that vault one names (%d left)", st.ChunksFreed, chunkRows(t, dsn))
	}
	if got := readFile(t, one, "/big"); !bytes.Equal([]byte(got), data) {
		t.Fatal("vault one's file changed after a collection of vault two")
	}
	for _, v := range []*vfs.Vault{one, two} {
		fsckClean(t, v)
	}

	// No vault names them any more: the next collection frees them.
	if err := b.Delete("f"); err != nil {
		t.Fatal(err)
	}
	if err := one.Update(func(tx *vfs.Tx) error { _, err := tx.Remove("/big", false, false); return err }); err != nil {
		t.Fatal(err)
	}
	one.Close()
	cs, gs, err := a.Compact("one")
	if err != nil {
		t.Fatal(err)
	}
	if gs.ChunksFreed != 4 || chunkRows(t, dsn) != 0 {
		t.Fatalf("compact %+v, gc %+v: %d chunks left, want 0", cs, gs, chunkRows(t, dsn))
	}
}
