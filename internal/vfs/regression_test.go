package vfs_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Minimal reproductions of model bugs found by the model and crash tests.
// Each failed before its fix; the comments say what was wrong.

// Diff reported a path as added (or deleted) when it exists, unchanged, in
// both states but names a different directory inode in each: a directory
// was renamed away and another made in its place. Diff keyed entries by
// (directory inode, name) and reported them at the directory's path in one
// state only, without checking what that path held in the other state.
func TestRegression_DiffEntryInMovedDirectory(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/x/f", "")
		if _, err := f.v.SaveCheckpoint("c", ""); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error {
			if err := tx.Rename(vfs.RootIno, "x", vfs.RootIno, "z", 0); err != nil {
				return err
			}
			x, err := tx.Mkdir(vfs.RootIno, "x", 0o755, 0, 0)
			if err != nil {
				return err
			}
			_, err = tx.Create(x.Ino, "f", 0o644, 0, 0)
			return err
		})
		// /x and /x/f hold the same (empty dir, empty 0644 file) in both states.
		got := changes(t, vfs.StateRef{Vault: f.v, Checkpoint: "c"}, vfs.StateRef{Vault: f.v})
		want := []string{"added /z", "added /z/f"}
		if !slices.Equal(got, want) {
			t.Fatalf("diff = %q, want %q", got, want)
		}
	})
}

// Diff between a fork and its parent took two unrelated files for one
// when each vault created a file after the fork: both allocate inode
// numbers from the same next_ino the fork copied (Vault.Fork), and Diff
// compared inodes of the two vaults by number.
func TestRegression_DiffForkInodeNumberCollision(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			f := newVault(t, engine)
			fork, err := f.home.Fork("test", "fork")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { checkFsck(t, fork); fork.Close() })
			ff := &fixture{t: t, home: f.home, v: fork}
			f.write("/a", "")      // the parent's first new inode
			f.write("/c", "same")  // its second
			ff.write("/c", "same") // the fork's first: the same number as the parent's /a
			got := changes(t, vfs.StateRef{Vault: f.v}, vfs.StateRef{Vault: fork})
			want := []string{"deleted /a"} // /c holds the same bytes and mode in both
			if !slices.Equal(got, want) {
				t.Fatalf("diff parent -> fork = %q, want %q", got, want)
			}
		})
	}
}

// Diff reported a file as modified when its bytes, size and mode were what
// they had been, because the same content could be stored as different
// chunks: a chunk kept explicit trailing zeros from a write ("abc\0\0")
// but not from a shrink and regrow ("abc", read back zero-padded), and
// Diff compares chunk hashes (differ.sameContent).
func TestRegression_DiffIdenticalContentStoredDifferently(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/t", "abc\x00\x00")
		if _, err := f.v.SaveCheckpoint("c", ""); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error {
			a, err := tx.Resolve("/t", true)
			if err != nil {
				return err
			}
			for _, size := range []uint64{3, 5} {
				if _, err := tx.SetAttr(a.Ino, vfs.SetAttr{Size: &size}); err != nil {
					return err
				}
			}
			return nil
		})
		if got := f.read("/t"); got != "abc\x00\x00" {
			t.Fatalf("content = %q", got)
		}
		if got := changes(t, vfs.StateRef{Vault: f.v, Checkpoint: "c"}, vfs.StateRef{Vault: f.v}); len(got) != 0 {
			t.Fatalf("diff of identical states = %q, want none", got)
		}
	})
}

// Diff reported a file renamed over another as modified by comparing it
// with its own former self (from its old path), not with what its new path
// held: inodeChanged reported an inode's change at each of its names in the
// new state without checking that the name held that inode before.
func TestRegression_DiffFileRenamedOverAnother(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/a", "")
		f.write("/d", "zz")
		if _, err := f.v.SaveCheckpoint("c", ""); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error {
			if err := tx.Rename(vfs.RootIno, "d", vfs.RootIno, "a", 0); err != nil {
				return err
			}
			a, err := tx.Resolve("/a", true)
			if err != nil {
				return err
			}
			size := uint64(0)
			_, err = tx.SetAttr(a.Ino, vfs.SetAttr{Size: &size})
			return err
		})
		// /a is an empty 0644 file in both states.
		got := changes(t, vfs.StateRef{Vault: f.v, Checkpoint: "c"}, vfs.StateRef{Vault: f.v})
		if want := []string{"deleted /d"}; !slices.Equal(got, want) {
			t.Fatalf("diff = %q, want %q", got, want)
		}
	})
}

// crashingEngine stands for a process that dies after a number of
// committed transactions: every later Update fails and changes nothing.
type crashingEngine struct {
	kv.Engine
	commits int // Updates still allowed
}

var errCrashed = errors.New("the process crashed")

func (e *crashingEngine) Update(fn func(kv.Tx) error) error {
	if e.commits == 0 {
		return errCrashed
	}
	e.commits--
	return e.Engine.Update(fn)
}

// A crash during Compact could leave a vault that fsck rejects. Compact
// dropped unreachable layers one transaction each, oldest first, so after
// the first step the next unreachable layer named a parent that was gone:
// fsck reported "layer N: parent M is missing". Dropping children first
// keeps every step consistent.
func TestRegression_CompactCrashLeavesOrphanLayer(t *testing.T) {
	mem := engines.NewMemory()
	eng := &crashingEngine{Engine: mem, commits: 1000}
	v, err := vfs.Create(eng, "test", vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} { // layers 1, 2, 3 frozen; top 4
		if _, err := v.SaveCheckpoint(name, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.RestoreCheckpoint("a"); err != nil { // top 5 over 1: 2 <- 3 <- 4 abandoned once b, c go
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c"} {
		if err := v.DeleteCheckpoint(name); err != nil {
			t.Fatal(err)
		}
	}
	eng.commits = 1 // the process dies after Compact's first step
	if _, err := v.Compact(); !errors.Is(err, errCrashed) {
		t.Fatalf("compact: %v", err)
	}
	after, err := vfs.Open(mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFsck(t, after)
}
