package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

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

// TestWriteChunks checks what a write-back cache persists: chunks
// replace the stored ones whole, an all-zero chunk becomes a hole, a
// short one reads as zeros past its data, the size grows to cover the
// chunks, the mtime is set and the ctime is the write's, not the
// persist's; a checkpoint taken before keeps the old content.
func TestWriteChunks(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		const cs = vfs.ChunkSize
		fill := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
		old := slices.Concat(fill('a', cs), fill('b', cs), make([]byte, cs), fill('d', 100))
		f.write("/f", string(old))
		if _, err := f.v.SaveCheckpoint("before", ""); err != nil {
			t.Fatal(err)
		}
		ino := resolve(t, f.v, "/f").Ino
		mtime := time.Unix(1_700_000_000, 0)
		ctime := time.Now().Add(time.Hour).Round(0) // later than any ctime the file has
		f.update(func(tx *vfs.Tx) error {
			return tx.WriteChunks(ino, 4*cs+10, mtime, ctime, []vfs.Chunk{
				{Index: 0, Data: fill('a', cs)},    // its own content
				{Index: 1, Data: make([]byte, cs)}, // zeros
				{Index: 2, Data: nil},              // a hole that stays one
				{Index: 3, Data: fill('D', 50)},
				{Index: 4, Data: fill('e', 10)}, // past the old end
			})
		})
		want := slices.Concat(fill('a', cs), make([]byte, 2*cs), fill('D', 50), make([]byte, cs-50), fill('e', 10))
		if got := f.read("/f"); got != string(want) {
			t.Errorf("after WriteChunks: %d bytes, not the %d written", len(got), len(want))
		}
		if got := readIn(t, f.v, "before", "/f"); got != string(old) {
			t.Errorf("the checkpoint taken before: %d bytes, not the %d it held", len(got), len(old))
		}
		if a := resolve(t, f.v, "/f"); a.Size != uint64(len(want)) || !a.Mtime.Equal(mtime) || !a.Ctime.Equal(ctime) {
			t.Errorf("size %d mtime %v ctime %v, want %d, %v and %v", a.Size, a.Mtime, a.Ctime, len(want), mtime, ctime)
		}
		// A write older than the file's last change (a chmod after it)
		// leaves its ctime.
		f.update(func(tx *vfs.Tx) error {
			return tx.WriteChunks(ino, 4*cs+10, mtime, mtime, []vfs.Chunk{{Index: 4, Data: fill('f', 10)}})
		})
		if a := resolve(t, f.v, "/f"); !a.Ctime.Equal(ctime) {
			t.Errorf("ctime %v after an older write, want %v kept", a.Ctime, ctime)
		}
	})
}

// TestWriteChunksUnchanged checks that a chunk persisted with the content
// it already has (a program that rewrites a whole file to change a part of
// it) writes neither its data nor its chunk map.
func TestWriteChunksUnchanged(t *testing.T) {
	eng := &countingEngine{Engine: engines.NewMemory(), puts: map[byte]int{}}
	v, err := vfs.Create(eng, "mem", vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkFsck(t, v)
		v.Close()
	})
	const cs = vfs.ChunkSize
	content := make([]byte, 4*cs)
	for i := range content {
		content[i] = byte(i * 7 / cs)
	}
	if err := v.Update(func(tx *vfs.Tx) error { _, err := tx.WriteFile("/f", content, 0o644); return err }); err != nil {
		t.Fatal(err)
	}
	ino := resolve(t, v, "/f").Ino
	persist := func(chunks ...int) map[byte]int {
		clear(eng.puts)
		var cs []vfs.Chunk
		for _, i := range chunks {
			cs = append(cs, vfs.Chunk{Index: uint64(i), Data: content[i*vfs.ChunkSize : (i+1)*vfs.ChunkSize]})
		}
		if err := v.Update(func(tx *vfs.Tx) error { return tx.WriteChunks(ino, uint64(len(content)), time.Now(), time.Now(), cs) }); err != nil {
			t.Fatal(err)
		}
		return maps.Clone(eng.puts)
	}
	if p := persist(0, 1, 2, 3); p['C'] != 0 || p['F'] != 0 {
		t.Errorf("rewriting the same content wrote %d chunks and %d chunk map entries", p['C'], p['F'])
	}
	content[2*cs+5] ^= 0xff
	if p := persist(0, 1, 2, 3); p['C'] != 1 || p['F'] != 1 {
		t.Errorf("one chunk changed: wrote %d chunks and %d chunk map entries, want 1 and 1", p['C'], p['F'])
	}
	var got []byte
	if err := v.View(func(tx *vfs.Tx) (err error) { got, err = tx.ReadFile("/f"); return err }); err != nil || !bytes.Equal(got, content) {
		t.Errorf("read back %d bytes (%v), not the %d written", len(got), err, len(content))
	}
}

func resolve(t *testing.T, v *vfs.Vault, p string) vfs.Attr {
	t.Helper()
	var a vfs.Attr
	if err := v.View(func(tx *vfs.Tx) (err error) { a, err = tx.Resolve(p, false); return err }); err != nil {
		t.Fatal(err)
	}
	return a
}

// countingEngine counts the Puts of its write transactions by the key's
// first byte (its record type).
type countingEngine struct {
	kv.Engine
	puts map[byte]int
}

func (e *countingEngine) Update(fn func(kv.Tx) error) error {
	return e.Engine.Update(func(tx kv.Tx) error { return fn(countingTx{tx, e}) })
}

type countingTx struct {
	kv.Tx
	e *countingEngine
}

func (t countingTx) Put(k, v []byte) error {
	if len(k) > 0 {
		t.e.puts[k[0]]++
	}
	return t.Tx.Put(k, v)
}

// TestBatchCounters checks the counters a batch writes once, at commit:
// the usage and the next inode number follow its steps, a failed step's
// share is dropped, a rollback drops them all, and what is committed
// agrees with the tree (fsck, at cleanup). With a read cache, puts also
// skip journal entries the top layer already has; fsck checks that every
// version still has one.
func TestBatchCounters(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			f := newVault(t, "sqlite")
			if cached {
				f.v.CacheReads()
			}
			usage := func(view func(func(*vfs.Tx) error) error) vfs.Usage {
				t.Helper()
				var u vfs.Usage
				if err := view(func(tx *vfs.Tx) (err error) { u, err = tx.Usage(); return err }); err != nil {
					t.Fatal(err)
				}
				return u
			}
			inos := map[vfs.Ino]string{}
			create := func(update func(func(*vfs.Tx) error) error, p string, fail bool) error {
				return update(func(tx *vfs.Tx) error {
					a, err := tx.WriteFile(p, []byte(p), 0o644)
					if err != nil {
						return err
					}
					if fail {
						return errors.New("step fails after its writes")
					}
					if other, dup := inos[a.Ino]; dup {
						t.Errorf("%s got inode %d, already %s's", p, a.Ino, other)
					}
					inos[a.Ino] = p
					return nil
				})
			}

			b, err := f.v.Batch()
			if err != nil {
				t.Fatal(err)
			}
			if err := create(b.Update, "/a", false); err != nil {
				t.Fatal(err)
			}
			if err := create(b.Update, "/b", true); err == nil {
				t.Fatal("the failing step succeeded")
			}
			if err := create(b.Update, "/c", false); err != nil {
				t.Fatal(err)
			}
			if u := usage(b.View); u != (vfs.Usage{Files: 2, Bytes: 4}) {
				t.Errorf("usage inside the batch: %+v, want 2 files of 4 bytes", u)
			}
			if u := usage(f.v.View); u != (vfs.Usage{}) {
				t.Errorf("usage outside the batch before commit: %+v, want none", u)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if u := usage(f.v.View); u != (vfs.Usage{Files: 2, Bytes: 4}) {
				t.Errorf("usage after commit: %+v, want 2 files of 4 bytes", u)
			}

			b, err = f.v.Batch()
			if err != nil {
				t.Fatal(err)
			}
			if err := create(b.Update, "/dropped", false); err != nil {
				t.Fatal(err)
			}
			if err := b.Rollback(); err != nil {
				t.Fatal(err)
			}
			delete(inos, maxIno(inos))
			if err := create(f.v.Update, "/d", false); err != nil {
				t.Fatal(err)
			}
			b, err = f.v.Batch()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"/e", "/f"} {
				if err := create(b.Update, p, false); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Update(func(tx *vfs.Tx) error { return tx.Unlink(vfs.RootIno, "a") }); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if u := usage(f.v.View); u != (vfs.Usage{Files: 4, Bytes: 8}) {
				t.Errorf("usage at the end: %+v, want 4 files of 8 bytes", u)
			}

			// After a checkpoint the versions read are the frozen layer's:
			// a change needs its own journal entry in the new top layer.
			if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the first transaction on the new layers fills no cache
				if got := f.read("/c"); got != "/c" {
					t.Fatalf("/c = %q", got)
				}
			}
			b, err = f.v.Batch()
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Update(func(tx *vfs.Tx) error {
				_, err := tx.WriteFile("/c", []byte("/c2"), 0o644)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func maxIno(m map[vfs.Ino]string) vfs.Ino {
	return slices.Max(slices.Collect(maps.Keys(m)))
}
