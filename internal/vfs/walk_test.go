package vfs_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// damageDentry writes a directory entry dir/name -> ino (a directory)
// straight into the top layer of vault file path, below the model, the way
// a damaged vault could hold one: the model itself refuses to make it.
func damageDentry(t *testing.T, eng kv.Engine, dir vfs.Ino, name string, ino vfs.Ino) {
	t.Helper()
	err := eng.Update(func(kt kv.Tx) error {
		top, err := kt.Get([]byte("Mtop"))
		if err != nil {
			return err
		}
		k := binary.BigEndian.AppendUint64([]byte{'D'}, uint64(dir))
		k = append(append(k, name...), 0)
		k = binary.BigEndian.AppendUint64(k, ^binary.BigEndian.Uint64(top))
		v := binary.BigEndian.AppendUint64(nil, uint64(ino))
		return kt.Put(k, append(v, byte(vfs.TypeDir)))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cycleVault makes checkpoint "empty", then /a/b/c with a file in each directory and an entry
// /a/b/c/loop naming /a again, and reopens the vault.
func cycleVault(t *testing.T, engine string) (*registry.Home, *vfs.Vault) {
	t.Helper()
	h, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("damaged", registry.CreateOptions{Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint("empty", ""); err != nil {
		t.Fatal(err)
	}
	var a, c vfs.Attr
	err = v.Update(func(tx *vfs.Tx) error {
		for _, p := range []string{"/a/f", "/a/b/f", "/a/b/c/f"} {
			d, _ := vfs.SplitPath(p)
			if _, err := tx.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if _, err := tx.WriteFile(p, []byte(p), 0o644); err != nil {
				return err
			}
		}
		if a, err = tx.Resolve("/a", false); err != nil {
			return err
		}
		c, err = tx.Resolve("/a/b/c", false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	damageDentry(t, v.Engine(), c.Ino, "loop", a.Ino)
	v.Close()
	if v, err = h.Open("damaged"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return h, v
}

func wantCycle(t *testing.T, what string, err error) {
	t.Helper()
	if !errs.Is(err, errs.CorruptVault) || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("%s in a vault with a cycle: %v (kind %s), want CorruptVault", what, err, errs.KindOf(err))
	}
}

func TestWalksStopAtDirectoryCycle(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			_, v := cycleVault(t, engine)
			// The damage is real: fsck sees it.
			if r, err := v.Fsck(); err != nil || r.OK() {
				t.Fatalf("fsck of the damaged vault: %v, %v", r, err)
			}
			err := v.Update(func(tx *vfs.Tx) error {
				_, err := tx.RemoveAll(vfs.RootIno, "a")
				return err
			})
			wantCycle(t, "RemoveAll", err)
			err = v.Update(func(tx *vfs.Tx) error {
				at, err := tx.Resolve("/a", false)
				if err != nil {
					return err
				}
				_, err = tx.CopyTree(at, vfs.RootIno, "copy")
				return err
			})
			wantCycle(t, "CopyTree", err)
			// Both refused walks changed nothing.
			err = v.View(func(tx *vfs.Tx) error {
				for _, p := range []string{"/a/f", "/a/b/c/f"} {
					if b, err := tx.ReadFile(p); err != nil || string(b) != p {
						t.Errorf("%s after the refused walks: %q, %v", p, b, err)
					}
				}
				if _, err := tx.Resolve("/copy", false); !errs.Is(err, errs.NotFound) {
					t.Errorf("/copy after a refused CopyTree: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// A diff from the empty state walks the whole cycle as added.
			_, err = vfs.Diff(vfs.StateRef{Vault: v, Checkpoint: "empty"}, vfs.StateRef{Vault: v})
			wantCycle(t, "Diff", err)
		})
	}
}

// A sound tree whose directories a walk meets once each is copied and
// removed whole, with the counts of every kind.
func TestRemoveAllAndCopyTreeCount(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/t/x", "12345")
		f.write("/t/d/y", "ab")
		f.update(func(tx *vfs.Tx) error {
			d, err := tx.Resolve("/t/d", false)
			if err != nil {
				return err
			}
			_, err = tx.Symlink(d.Ino, "l", "../x", 0, 0)
			return err
		})
		f.update(func(tx *vfs.Tx) error {
			at, err := tx.Resolve("/t", false)
			if err != nil {
				return err
			}
			st, err := tx.CopyTree(at, vfs.RootIno, "u")
			if err != nil {
				return err
			}
			if want := (vfs.CopyStats{Files: 2, Dirs: 2, Symlinks: 1, Bytes: 7}); st != want {
				t.Errorf("CopyTree stats %+v, want %+v", st, want)
			}
			n, err := tx.RemoveAll(vfs.RootIno, "t")
			if n != 5 {
				t.Errorf("RemoveAll removed %d names, want 5", n)
			}
			return err
		})
		if got := f.read("/u/d/y"); got != "ab" {
			t.Errorf("/u/d/y = %q", got)
		}
		if got := f.read("/t/x"); got != "<missing>" {
			t.Errorf("/t/x after RemoveAll: %q", got)
		}
	})
}
