package vfs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// viewCountingEngine counts the read transactions begun on it.
type viewCountingEngine struct {
	kv.Engine
	views int
}

func (e *viewCountingEngine) View(fn func(kv.Tx) error) error {
	e.views++
	return e.Engine.View(fn)
}

// readVia returns the content of p as view sees it, or "" when p is absent.
func readVia(t *testing.T, view func(func(*vfs.Tx) error) error, p string) string {
	t.Helper()
	var got string
	if err := view(func(tx *vfs.Tx) error {
		got = ""
		a, err := tx.Resolve(p, false)
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if err != nil {
			return err
		}
		buf := make([]byte, a.Size)
		n, err := tx.Read(a.Ino, 0, buf)
		got = string(buf[:n])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// existsVia tells whether p resolves as view sees it: a lookup the cache
// can answer alone, unlike a read of the data.
func existsVia(t *testing.T, view func(func(*vfs.Tx) error) error, p string) bool {
	t.Helper()
	var found bool
	if err := view(func(tx *vfs.Tx) error {
		_, err := tx.Resolve(p, false)
		found = err == nil
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// cachedVault returns a vault in memory with its read cache on, and its
// engine, which counts read transactions.
func cachedVault(t *testing.T) (*fixture, *viewCountingEngine) {
	t.Helper()
	eng := &viewCountingEngine{Engine: engines.NewMemory()}
	v, err := vfs.Create(eng, "mem", vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	v.CacheReads()
	return &fixture{t: t, v: v}, eng
}

// TestReadCacheAnswersRepeatedReads checks that a read the cache holds
// begins no engine transaction, and that a change is seen at once.
func TestReadCacheAnswersRepeatedReads(t *testing.T) {
	f, eng := cachedVault(t)
	v := f.v
	f.write("/dir/a", "one")
	statA := func(tx *vfs.Tx) error { _, err := tx.Resolve("/dir/a", false); return err }

	if err := v.ViewCached(statA); err != nil { // fills the cache
		t.Fatal(err)
	}
	before := eng.views
	for range 3 {
		if err := v.ViewCached(statA); err != nil {
			t.Fatal(err)
		}
	}
	if eng.views != before {
		t.Errorf("cached lookups began %d engine transactions, want 0", eng.views-before)
	}
	f.write("/dir/a", "two")
	if got := readVia(t, v.ViewCached, "/dir/a"); got != "two" {
		t.Errorf("after a change: %q, want two", got)
	}
	f.update(func(tx *vfs.Tx) error {
		dir, name, err := tx.ResolveParent("/dir/a")
		if err != nil {
			return err
		}
		return tx.Unlink(dir, name)
	})
	if err := v.ViewCached(statA); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("after unlink: %v, want not found", err)
	}
	checkFsck(t, v)
}

// TestReadCacheFollowsBatches checks, on SQLite, that the cache never
// shows a state that is not the one asked for: a batch's reads see its
// steps, reads outside it the last commit, and a failed step, a rolled
// back batch and a restored checkpoint leave nothing stale behind.
func TestReadCacheFollowsBatches(t *testing.T) {
	f := newVault(t, "sqlite")
	f.v.CacheReads()
	f.write("/a", "1")
	if got := readVia(t, f.v.ViewCached, "/a"); got != "1" {
		t.Fatalf("/a = %q", got)
	}

	b, err := f.v.Batch()
	if err != nil {
		t.Fatal(err)
	}
	step := func(fn func(tx *vfs.Tx) error) error { return b.Update(fn) }
	if err := step(func(tx *vfs.Tx) error {
		_, err := tx.WriteFile("/a", []byte("2"), 0o644)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := readVia(t, b.ViewCached, "/a"); got != "2" {
		t.Errorf("inside the batch /a = %q, want 2", got)
	}
	if got := readVia(t, f.v.ViewCached, "/a"); got != "1" {
		t.Errorf("outside the batch before its commit /a = %q, want 1", got)
	}

	// A step that fails after it wrote is undone, and so is what it cached.
	errStep := errors.New("step fails")
	if err := step(func(tx *vfs.Tx) error {
		if _, err := tx.WriteFile("/b", []byte("b"), 0o644); err != nil {
			return err
		}
		if _, err := tx.Resolve("/b", false); err != nil {
			return err
		}
		return errStep
	}); !errors.Is(err, errStep) {
		t.Fatalf("failing step: %v", err)
	}
	if existsVia(t, b.ViewCached, "/b") {
		t.Error("a failed step's file is visible")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readVia(t, f.v.ViewCached, "/a"); got != "2" {
		t.Errorf("after the commit /a = %q, want 2", got)
	}

	// A rolled back batch: what its reads cached goes with it.
	b, err = f.v.Batch()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *vfs.Tx) error {
		if _, err := tx.WriteFile("/c", []byte("c"), 0o644); err != nil {
			return err
		}
		_, err := tx.WriteFile("/a", []byte("3"), 0o644)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !existsVia(t, b.ViewCached, "/c") || readVia(t, b.ViewCached, "/a") != "3" {
		t.Fatal("the batch does not see its own step")
	}
	if err := b.Rollback(); err != nil {
		t.Fatal(err)
	}
	if existsVia(t, f.v.ViewCached, "/c") {
		t.Error("after rollback /c is visible")
	}
	if got := readVia(t, f.v.ViewCached, "/a"); got != "2" {
		t.Errorf("after rollback /a = %q, want 2", got)
	}

	// A restored checkpoint is another layer graph.
	if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
		t.Fatal(err)
	}
	f.write("/a", "4")
	if got := readVia(t, f.v.ViewCached, "/a"); got != "4" {
		t.Fatalf("/a = %q, want 4", got)
	}
	if err := f.v.RestoreCheckpoint("cp"); err != nil {
		t.Fatal(err)
	}
	if got := readVia(t, f.v.ViewCached, "/a"); got != "2" {
		t.Errorf("after restoring the checkpoint /a = %q, want 2", got)
	}
}

// TestReadCacheKnowsNewInodes checks the prefixes the cache holds whole:
// in a directory this Vault created, a missing name and a missing xattr
// are answered without the engine; names and xattrs added later are seen;
// and a step that fails takes back what it created.
func TestReadCacheKnowsNewInodes(t *testing.T) {
	f, eng := cachedVault(t)
	v := f.v
	f.write("/new/a", "one") // /new and /new/a are made by this Vault
	if !existsVia(t, v.ViewCached, "/new/a") {
		t.Fatal("/new/a is missing")
	}
	xattr := func(p, name string) (string, error) {
		var val []byte
		err := v.ViewCached(func(tx *vfs.Tx) error {
			a, err := tx.Resolve(p, false)
			if err == nil {
				val, err = tx.GetXattr(a.Ino, name)
			}
			return err
		})
		return string(val), err
	}
	before := eng.views
	if existsVia(t, v.ViewCached, "/new/b") {
		t.Error("/new/b exists")
	}
	if _, err := xattr("/new/a", "security.capability"); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("xattr of a new file: %v, want ENODATA", err)
	}
	if eng.views != before {
		t.Errorf("lookups under new inodes began %d engine transactions, want 0", eng.views-before)
	}

	f.write("/new/b", "two")
	f.update(func(tx *vfs.Tx) error {
		a, err := tx.Resolve("/new/a", false)
		if err != nil {
			return err
		}
		return tx.SetXattr(a.Ino, "user.k", []byte("v"), 0)
	})
	if !existsVia(t, v.ViewCached, "/new/b") {
		t.Error("/new/b, written later, is missing")
	}
	if got, err := xattr("/new/a", "user.k"); err != nil || got != "v" {
		t.Errorf("user.k = %q, %v; want v", got, err)
	}

	// A new name for an old inode (a hard link) says nothing of its
	// xattrs: set one, empty the cache (a checkpoint), link, read it back.
	f.update(func(tx *vfs.Tx) error {
		a, err := tx.Resolve("/new/b", false)
		if err != nil {
			return err
		}
		return tx.SetXattr(a.Ino, "user.old", []byte("kept"), 0)
	})
	if _, err := v.SaveCheckpoint("cp", ""); err != nil {
		t.Fatal(err)
	}
	f.update(func(tx *vfs.Tx) error {
		a, err := tx.Resolve("/new/b", false)
		if err != nil {
			return err
		}
		_, err = tx.Link(a.Ino, vfs.RootIno, "b2")
		return err
	})
	for range 2 { // the first read after the checkpoint fills no cache
		if got, err := xattr("/b2", "user.old"); err != nil || got != "kept" {
			t.Errorf("user.old of a linked file = %q, %v; want kept", got, err)
		}
	}

	// A failed step's inode is not known as empty: its number may come
	// back, and its records never existed.
	err := v.Update(func(tx *vfs.Tx) error {
		if _, err := tx.MkdirAll("/new/c", 0o755); err != nil {
			return err
		}
		if _, err := tx.WriteFile("/new/c/x", []byte("x"), 0o644); err != nil {
			return err
		}
		return errors.New("fail after creating")
	})
	if err == nil {
		t.Fatal("the failing update succeeded")
	}
	if existsVia(t, v.ViewCached, "/new/c") {
		t.Error("/new/c survived its failed update")
	}
	checkFsck(t, v)
}
