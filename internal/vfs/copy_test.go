package vfs_test

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestCopy: Tx.Copy is cp for the CLI and the library: into a directory
// or onto a path, -r for directories (links kept as links), a symlink
// followed without -r, counts of what it copied, and refusals that
// change nothing.
func TestCopy(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.update(func(tx *vfs.Tx) error {
			if _, err := tx.MkdirAll("/src/sub", 0o750); err != nil {
				return err
			}
			if _, err := tx.WriteFile("/src/a.txt", []byte("aaa"), 0o600); err != nil {
				return err
			}
			if _, err := tx.WriteFile("/src/sub/b.txt", []byte("bb"), 0o644); err != nil {
				return err
			}
			dir, name, err := tx.ResolveParent("/src/link")
			if err != nil {
				return err
			}
			_, err = tx.Symlink(dir, name, "a.txt", 0, 0)
			return err
		})
		f.update(func(tx *vfs.Tx) error {
			r, err := tx.Copy("/src", "/dst", true)
			if err != nil {
				return err
			}
			want := vfs.Copied{From: "/src", To: "/dst", CopyStats: vfs.CopyStats{Files: 2, Dirs: 2, Symlinks: 1, Bytes: 5}}
			if r != want {
				t.Errorf("Copy -r = %+v, want %+v", r, want)
			}
			if a, err := tx.Resolve("/dst/link", false); err != nil || a.Type != vfs.TypeSymlink {
				t.Errorf("the link copied -r: %+v, %v", a, err)
			}
			if a, err := tx.Resolve("/dst/sub", true); err != nil || a.Mode&0o777 != 0o750 {
				t.Errorf("the copied dir's mode: %o, %v", a.Mode, err)
			}
			// Into a directory, under the source's name; a symlink is
			// followed without -r.
			if r, err = tx.Copy("/src/link", "/dst/sub", false); err != nil || r.To != "/dst/sub/link" || r.Files != 1 || r.Bytes != 3 {
				t.Errorf("Copy of a symlink into a dir = %+v, %v", r, err)
			}
			if a, err := tx.Resolve("/dst/sub/link", false); err != nil || a.Type != vfs.TypeFile {
				t.Errorf("the followed link: %+v, %v", a, err)
			}
			return nil
		})
		for _, c := range []struct {
			src, dst  string
			recursive bool
			kind      errs.Kind
		}{
			{"/src", "/other", false, errs.NotAFile},
			{"/src", "/src/sub", true, errs.InvalidInput}, // into itself
			{"/src", "/src", true, errs.InvalidInput},
			{"/src/a.txt", "/src/a.txt", false, errs.InvalidInput}, // onto itself
			{"/missing", "/x", false, errs.NotFound},
			{"/", "/x", true, errs.InvalidInput}, // the root into itself
		} {
			err := f.v.Update(func(tx *vfs.Tx) error {
				_, err := tx.Copy(c.src, c.dst, c.recursive)
				return err
			})
			if !errs.Is(err, c.kind) {
				t.Errorf("Copy(%s, %s, %v) = %v, want %s", c.src, c.dst, c.recursive, err, c.kind)
			}
		}
		f.update(func(tx *vfs.Tx) error {
			for _, p := range []string{"/other", "/src/sub/src", "/x"} {
				if _, err := tx.Resolve(p, false); !errs.Is(err, errs.NotFound) {
					t.Errorf("%s after the refused copies: %v", p, err)
				}
			}
			return nil
		})
	})
}
