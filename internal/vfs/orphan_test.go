package vfs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestOrphans checks files unlinked while open: with SetKeepOrphans the
// last unlink (or a rename over the file) leaves an orphan that is still
// readable, writable and counted, has no path, cannot be linked again,
// survives a checkpoint, and goes with ReleaseOrphan; fsck accepts every
// step.
func TestOrphans(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.v.SetKeepOrphans(true)
		f.write("/a", "alpha")
		f.write("/b", "beta")
		f.write("/c", "gamma")
		var a, b vfs.Attr
		f.update(func(tx *vfs.Tx) (err error) {
			if a, err = tx.Resolve("/a", false); err != nil {
				return err
			}
			if b, err = tx.Resolve("/b", false); err != nil {
				return err
			}
			if err := tx.Unlink(vfs.RootIno, "a"); err != nil {
				return err
			}
			return tx.Rename(vfs.RootIno, "c", vfs.RootIno, "b", 0) // b loses its name
		})
		checkFsck(t, f.v)
		f.update(func(tx *vfs.Tx) error {
			got, err := tx.GetAttr(a.Ino)
			if err != nil || got.Nlink != 0 {
				t.Errorf("orphan attrs: %+v, %v", got, err)
			}
			if _, err := tx.Write(a.Ino, 5, []byte(" still")); err != nil {
				t.Errorf("write to an orphan: %v", err)
			}
			buf := make([]byte, 64)
			n, err := tx.Read(a.Ino, 0, buf)
			if err != nil || string(buf[:n]) != "alpha still" {
				t.Errorf("orphan reads %q, %v", buf[:n], err)
			}
			if _, err := tx.Link(a.Ino, vfs.RootIno, "again"); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("link of an orphan: %v, want ENOENT", err)
			}
			orphans, err := tx.Orphans()
			if err != nil || len(orphans) != 2 {
				t.Errorf("orphans %v, %v; want a and b", orphans, err)
			}
			u, _ := tx.Usage()
			if u.Files != 3 {
				t.Errorf("usage counts %d files, want 3 (one named, two orphans)", u.Files)
			}
			return nil
		})
		if _, err := f.v.SaveCheckpoint("with-orphans", ""); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error {
			for _, ino := range []vfs.Ino{a.Ino, b.Ino} {
				if ok, err := tx.ReleaseOrphan(ino); err != nil || !ok {
					t.Errorf("release %d: %v, %v", ino, ok, err)
				}
			}
			if ok, err := tx.ReleaseOrphan(a.Ino); err != nil || ok {
				t.Errorf("second release: %v, %v", ok, err)
			}
			if _, err := tx.GetAttr(a.Ino); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("released orphan: %v, want ENOENT", err)
			}
			u, _ := tx.Usage()
			if u.Files != 1 {
				t.Errorf("usage counts %d files after release, want 1", u.Files)
			}
			return nil
		})
		if got := f.read("/b"); got != "gamma" {
			t.Errorf("/b = %q", got)
		}
	})
}
