package avfs

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Paths inside a vault are slash-separated and absolute ("/src/main.go");
// a relative path is taken from the root, and ".." may not climb above it
// (InvalidPath). Each call below is one transaction of the working state.

// FileInfo describes one file of a vault.
type FileInfo struct {
	Name    string // the last element of the path ("/" for the root)
	Type    FileType
	Size    int64       // bytes, for regular files
	Mode    fs.FileMode // permission bits (0o644), without type bits
	ModTime time.Time   // UTC
	Target  string      // a symlink's target
}

// IsDir reports whether the file is a directory.
func (fi FileInfo) IsDir() bool { return fi.Type == TypeDir }

// ReadFile returns the content of the file at path, following symlinks.
func (v *Vault) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := stopped(ctx, "read"); err != nil {
		return nil, err
	}
	var b []byte
	err := v.v.View(func(tx *vfs.Tx) (err error) {
		b, err = tx.ReadFile(path)
		return err
	})
	return b, wrapErr(err)
}

// WriteFile writes data to the file at path, creating it with permissions
// perm, or replacing its content, like os.WriteFile. Its directory must
// exist (see MkdirAll). The write is atomic: all of data or nothing.
func (v *Vault) WriteFile(ctx context.Context, path string, data []byte, perm fs.FileMode) error {
	if err := stopped(ctx, "write"); err != nil {
		return err
	}
	return v.update(func(tx *vfs.Tx) error {
		_, err := tx.WriteFile(path, data, uint32(perm.Perm()))
		return err
	})
}

// MkdirAll creates the directory at path and every missing parent, with
// permissions perm, like os.MkdirAll.
func (v *Vault) MkdirAll(ctx context.Context, path string, perm fs.FileMode) error {
	if err := stopped(ctx, "mkdir"); err != nil {
		return err
	}
	return v.update(func(tx *vfs.Tx) error {
		_, err := tx.MkdirAll(path, uint32(perm.Perm()))
		return err
	})
}

// Symlink creates at path a symlink to target, like os.Symlink. target is
// kept as given; a relative one is taken from the link's directory.
func (v *Vault) Symlink(ctx context.Context, target, path string) error {
	if err := stopped(ctx, "symlink"); err != nil {
		return err
	}
	return v.update(func(tx *vfs.Tx) error {
		dir, name, err := tx.ResolveParent(path)
		if err != nil {
			return err
		}
		_, err = tx.Symlink(dir, name, target, 0, 0)
		return err
	})
}

// Stat describes the file at path, without following a final symlink.
func (v *Vault) Stat(ctx context.Context, path string) (FileInfo, error) {
	if err := stopped(ctx, "stat"); err != nil {
		return FileInfo{}, err
	}
	var fi FileInfo
	err := v.v.View(func(tx *vfs.Tx) error {
		clean, err := vfs.CleanPath(path)
		if err != nil {
			return err
		}
		a, err := tx.Resolve(clean, false)
		if err != nil {
			return err
		}
		_, name := vfs.SplitPath(clean)
		if clean == "/" {
			name = "/"
		}
		fi, err = info(tx, name, a)
		return err
	})
	return fi, wrapErr(err)
}

// ReadDir lists the directory at path, sorted by name.
func (v *Vault) ReadDir(ctx context.Context, path string) ([]FileInfo, error) {
	if err := stopped(ctx, "readdir"); err != nil {
		return nil, err
	}
	var out []FileInfo
	err := v.v.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(path, true)
		if err != nil {
			return err
		}
		if a.Type != vfs.TypeDir {
			return errs.E("readdir", path, syscall.ENOTDIR)
		}
		ents, err := tx.ReadDir(a.Ino)
		if err != nil {
			return err
		}
		out = make([]FileInfo, 0, len(ents))
		for _, e := range ents {
			a, err := tx.GetAttr(e.Ino)
			if err != nil {
				return err
			}
			fi, err := info(tx, e.Name, a)
			if err != nil {
				return err
			}
			out = append(out, fi)
		}
		return nil
	})
	return out, wrapErr(err)
}

// Remove removes the file, symlink or empty directory at path.
func (v *Vault) Remove(ctx context.Context, path string) error {
	if err := stopped(ctx, "remove"); err != nil {
		return err
	}
	return v.update(func(tx *vfs.Tx) error {
		dir, name, a, err := lookupParent(tx, path)
		if err != nil {
			return err
		}
		if a.Type == vfs.TypeDir {
			return tx.Rmdir(dir, name)
		}
		return tx.Unlink(dir, name)
	})
}

// RemoveAll removes path and everything below it, in one transaction,
// and returns how many names it removed (0 when path did not exist, which
// is not an error, as for os.RemoveAll). Symlinks are removed, never
// followed; the root cannot be removed (InvalidPath).
func (v *Vault) RemoveAll(ctx context.Context, path string) (int, error) {
	if err := stopped(ctx, "rm"); err != nil {
		return 0, err
	}
	var n int
	err := v.update(func(tx *vfs.Tx) error {
		r, err := tx.Remove(path, true, true)
		n = r.Removed
		return err
	})
	return n, err
}

// lookupParent finds the directory holding path, path's name in it and
// what it is (a symlink itself, never its target).
func lookupParent(tx *vfs.Tx, path string) (vfs.Ino, string, vfs.Attr, error) {
	clean, err := vfs.CleanPath(path)
	if err != nil {
		return 0, "", vfs.Attr{}, err
	}
	if clean == "/" {
		return 0, "", vfs.Attr{}, &errs.Error{Kind: errs.InvalidPath, Op: "remove", Path: clean,
			Err: errors.New("refusing to remove the vault root")}
	}
	dir, name, err := tx.ResolveParent(clean)
	if err != nil {
		return 0, "", vfs.Attr{}, err
	}
	a, err := tx.Lookup(dir, name)
	return dir, name, a, err
}

// CopyStats counts what Copy copied.
type CopyStats struct {
	Files    int   // regular and special files
	Dirs     int   // directories, the top one included
	Symlinks int   // symlinks, copied as links
	Bytes    int64 // bytes of the regular files, shared with the source rather than written
}

// Copy copies src and everything below it to dst, or into dst when dst is
// a directory, like cp -r, in one transaction: existing files are
// replaced, existing directories merged, modes kept, symlinks copied as
// links. File data is shared with the source, so a copy adds no data. A
// directory copied into itself is InvalidInput.
func (v *Vault) Copy(ctx context.Context, src, dst string) (CopyStats, error) {
	if err := stopped(ctx, "cp"); err != nil {
		return CopyStats{}, err
	}
	var st CopyStats
	err := v.update(func(tx *vfs.Tx) error {
		r, err := tx.Copy(src, dst, true)
		st = CopyStats{Files: r.Files, Dirs: r.Dirs, Symlinks: r.Symlinks, Bytes: r.Bytes}
		return err
	})
	return st, err
}

// Move moves src to dst, or into dst when dst is a directory, like mv,
// and returns the path src has now. An existing file at the destination
// is replaced. Nothing is copied: it costs the same whatever src holds.
func (v *Vault) Move(ctx context.Context, src, dst string) (string, error) {
	if err := stopped(ctx, "mv"); err != nil {
		return "", err
	}
	var to string
	err := v.update(func(tx *vfs.Tx) (err error) {
		to, err = tx.Move(src, dst)
		return err
	})
	return to, err
}

func info(tx *vfs.Tx, name string, a vfs.Attr) (FileInfo, error) {
	fi := FileInfo{Name: name, Type: FileType(a.Type.String()), Mode: fs.FileMode(a.Mode).Perm(), ModTime: a.Mtime.UTC()}
	if a.Type == vfs.TypeFile {
		fi.Size = int64(a.Size)
	}
	if a.Type == vfs.TypeSymlink {
		t, err := tx.Readlink(a.Ino)
		if err != nil {
			return fi, err
		}
		fi.Target = t
	}
	return fi, nil
}

// update runs fn in one write transaction of the working state.
func (v *Vault) update(fn func(*vfs.Tx) error) error { return wrapErr(v.v.Update(fn)) }
