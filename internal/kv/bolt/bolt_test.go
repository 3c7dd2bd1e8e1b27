package bolt_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/bolt"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
)

func newDB(t *testing.T) (*bolt.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vault.bolt")
	db, err := bolt.Create(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Engine {
		db, _ := newDB(t)
		return db
	})
}

// fill writes n keys with values of size bytes, so the file spans many
// pages, then closes the database.
func fill(t *testing.T, db *bolt.DB, n, size int) {
	t.Helper()
	err := db.Update(func(tx kv.Tx) error {
		for i := range n {
			if err := tx.Put(fmt.Appendf(nil, "key%06d", i), make([]byte, size)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReopenAndCreateExisting(t *testing.T) {
	db, path := newDB(t)
	fill(t, db, 10, 10)
	if _, err := bolt.Create(path, nil); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing file = %v, want os.ErrExist", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx kv.Tx) error {
		_, err := tx.Get([]byte("key000009"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBusy opens the file a second time: bbolt's flock is per open file,
// so this stands in for a second process.
func TestBusy(t *testing.T) {
	_, path := newDB(t)
	_, err := bolt.Open(path, &bolt.Options{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, kv.ErrBusy) {
		t.Fatalf("second Open = %v, want ErrBusy", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	db, vault := newDB(t)
	fill(t, db, 2000, 100)
	data, err := os.ReadFile(vault)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt grows its file ahead of use, so "half the file" can still
	// hold every page; halve what the meta page says is in use instead.
	bdb, err := bbolt.Open(vault, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	bdb.View(func(tx *bbolt.Tx) error { used = tx.Size(); return nil })
	bdb.Close()
	// Another program's bbolt file: valid, but without our bucket.
	other := filepath.Join(dir, "other.bolt")
	odb, err := bbolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	odb.Close()

	badMetas := append([]byte(nil), data...)
	badMetas[70] ^= 0xff   // meta 0 checksum
	badMetas[4096+70] ^= 1 // meta 1 checksum

	tests := []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "nope"), os.ErrNotExist},
		{"empty", write("empty", nil), kv.ErrForeign},
		{"text", write("text", []byte("just some text, long enough to pass offset 16\n")), kv.ErrForeign},
		{"other bbolt", other, kv.ErrForeign},
		{"50 bytes", write("50", data[:50]), kv.ErrCorrupt},
		{"one page", write("page", data[:4096]), kv.ErrCorrupt},
		{"half", write("half", data[:used/2]), kv.ErrCorrupt},
		{"bad metas", write("metas", badMetas), kv.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := bolt.Open(tc.path, nil)
			if err == nil {
				db.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestDamagedPages scribbles over data pages of a valid vault. Whatever
// bbolt makes of them, the process must survive: every call returns
// (possibly kv.ErrCorrupt) instead of panicking or faulting.
func TestDamagedPages(t *testing.T) {
	db, vault := newDB(t)
	fill(t, db, 3000, 200)
	data, err := os.ReadFile(vault)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	corrupted := 0
	for i := range 20 {
		bad := append([]byte(nil), data...)
		// Leave the two meta pages alone: Detect already covers those.
		for range 1 + i%4 {
			page := 2 + r.IntN(len(bad)/4096-2)
			off := page*4096 + r.IntN(64)
			for j := range 16 {
				bad[off+j] = byte(r.Uint32())
			}
		}
		p := filepath.Join(t.TempDir(), "bad.bolt")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		err := exercise(p)
		if errors.Is(err, kv.ErrCorrupt) {
			corrupted++
		}
	}
	t.Logf("%d of 20 damaged files reported kv.ErrCorrupt", corrupted)
}

func exercise(path string) error {
	db, err := bolt.Open(path, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	err = db.View(func(tx kv.Tx) error {
		return tx.Scan(nil, nil, func(k, v []byte) (bool, error) {
			_, err := tx.Get(k)
			return true, err
		})
	})
	if err != nil {
		return err
	}
	return db.Update(func(tx kv.Tx) error {
		for i := range 500 {
			if err := tx.Put(fmt.Appendf(nil, "key%06d", i*7), []byte("x")); err != nil {
				return err
			}
		}
		return tx.Delete([]byte("key000001"))
	})
}

// TestOpenWaitingThroughARewrite opens a vault while another handle holds
// it and rewrites it into a new file: the waiting open must not get the
// old, unlinked file when the rewrite lets go of it, but the new one,
// once its holder closes it.
func TestOpenWaitingThroughARewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.bolt")
	a, err := bolt.Create(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	type opened struct {
		db  *bolt.DB
		err error
	}
	res := make(chan opened, 1)
	go func() {
		db, err := bolt.Open(path, &bolt.Options{Timeout: 5 * time.Second})
		res <- opened{db, err}
	}()
	time.Sleep(300 * time.Millisecond) // the open waits for a's lock
	if err := a.Rewrite(); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("after the rewrite")) }); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-res:
		if o.db != nil {
			o.db.Close()
		}
		t.Fatalf("the waiting open returned while the new file is held: %v", o.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	o := <-res
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.db.Close()
	if err := o.db.View(func(tx kv.Tx) error {
		v, err := tx.Get([]byte("k"))
		if err == nil && string(v) != "after the rewrite" {
			err = fmt.Errorf("k = %q", v)
		}
		return err
	}); err != nil {
		t.Fatalf("the open got another file than the path's: %v", err)
	}
}
