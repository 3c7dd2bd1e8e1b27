package sqlite_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

// TestSyncSyncsTheLog checks the barrier of deferred commits: Sync syncs
// the log after it holds every commit made before the call. A Sync that
// synced nothing, or the wrong file, would let a power cut take commits
// an fsync through the mount had reported durable.
func TestSyncSyncsTheLog(t *testing.T) {
	db, path := newDB(t, nil)
	if err := db.DeferSync(true); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 100<<10)
	if err := db.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), value) }); err != nil {
		t.Fatal(err)
	}
	committed, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	var synced []string
	t.Cleanup(sqlite.OnSync(func(f *os.File) {
		if fi, err := f.Stat(); err == nil && os.SameFile(fi, committed) && fi.Size() >= committed.Size() {
			synced = append(synced, f.Name())
		}
	}))
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(synced) == 0 {
		t.Fatal("Sync did not sync the log holding the deferred commit")
	}
}

// TestIdleCheckpoint checks the background checkpoint of deferred
// commits: once the writer rests, the database file alone holds what was
// committed; it stops with DeferSync(false), and a vault that never
// defers its commits has none.
func TestIdleCheckpoint(t *testing.T) {
	t.Cleanup(sqlite.SetCheckpointIdle(time.Millisecond, 1))
	db, path := newDB(t, nil)
	if db.Checkpointing() {
		t.Fatal("checkpointing in the background without deferred commits")
	}
	if err := db.DeferSync(true); err != nil {
		t.Fatal(err)
	}
	if !db.Checkpointing() {
		t.Fatal("no background checkpoint with deferred commits")
	}
	value := bytes.Repeat([]byte("v"), 64<<10)
	if err := db.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), value) }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !mainFileHolds(t, path, "k", value) {
		if time.Now().After(deadline) {
			t.Fatal("the database file does not hold the commit 10 s after the writer's last commit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := db.DeferSync(false); err != nil {
		t.Fatal(err)
	}
	if db.Checkpointing() {
		t.Error("still checkpointing in the background after DeferSync(false)")
	}
}

// mainFileHolds reports whether a copy of the database file, without its
// log, holds key with value.
func mainFileHolds(t *testing.T, path, key string, value []byte) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(cp, nil)
	if err != nil {
		return false // copied while a checkpoint wrote it
	}
	defer db.Close()
	var got []byte
	err = db.View(func(tx kv.Tx) error {
		v, err := tx.Get([]byte(key))
		got = bytes.Clone(v)
		return err
	})
	return err == nil && bytes.Equal(got, value)
}

// TestCheckpointUnderLoad checkpoints after every commit while writers
// and readers run, then checks every value, in this process and after a
// reopen.
func TestCheckpointUnderLoad(t *testing.T) {
	t.Cleanup(sqlite.SetCheckpointIdle(0, 1))
	db, path := newDB(t, nil)
	if err := db.DeferSync(true); err != nil {
		t.Fatal(err)
	}
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 20<<10+i) }
	const n = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := db.View(func(tx kv.Tx) error {
					return tx.Scan(nil, nil, func(k, v []byte) (bool, error) { return true, nil })
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range n {
		if err := db.Update(func(tx kv.Tx) error { return tx.Put(fmt.Appendf(nil, "k%03d", i), val(i)) }); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	check := func(db kv.Engine) {
		t.Helper()
		if err := db.View(func(tx kv.Tx) error {
			for i := range n {
				v, err := tx.Get(fmt.Appendf(nil, "k%03d", i))
				if err != nil {
					return err
				}
				if !bytes.Equal(v, val(i)) {
					return fmt.Errorf("k%03d: %d bytes, want %d", i, len(v), len(val(i)))
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	check(db2)
}

// TestWriterCheckpoints checks that the log stays bounded under a writer
// that never rests, with deferred commits and without: the commit that
// takes the log past SQLite's automatic checkpoint copies it into the
// database file before it returns.
func TestWriterCheckpoints(t *testing.T) {
	t.Cleanup(sqlite.SetCheckpointIdle(time.Hour, 1)) // no background checkpoint
	db, path := newDB(t, nil)
	value := bytes.Repeat([]byte("w"), 512<<10) // 32 pages of 16 KiB
	for _, deferred := range []bool{true, false} {
		if err := db.DeferSync(deferred); err != nil {
			t.Fatal(err)
		}
		first := fmt.Sprintf("first-%v", deferred)
		for i := range 40 { // past 1,000 pages of log
			k := fmt.Sprintf("%v-%d", deferred, i)
			if i == 0 {
				k = first
			}
			if err := db.Update(func(tx kv.Tx) error { return tx.Put([]byte(k), value) }); err != nil {
				t.Fatal(err)
			}
		}
		if !mainFileHolds(t, path, first, value) {
			t.Errorf("deferred %v: the database file does not hold the first of 40 commits of 512 KiB", deferred)
		}
		if fi, err := os.Stat(path + "-wal"); err != nil {
			t.Fatal(err)
		} else if fi.Size() > 20<<20 {
			t.Errorf("deferred %v: the log grew to %d bytes", deferred, fi.Size())
		}
	}
}
