package vfs

import (
	"errors"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Path operations the command line and the MCP server share: each is what
// one of their commands does, so both behave alike.

// Target resolves where src goes for a copy, a move or a link to dst:
// into dst when dst is a directory (under srcName), else dst itself.
func (t *Tx) Target(dst, srcName string) (Ino, string, error) {
	if at, err := t.Resolve(dst, true); err == nil && at.Type == TypeDir {
		if srcName == "/" || srcName == "" {
			return 0, "", &errs.Error{Kind: errs.InvalidPath, Path: dst, Err: errors.New("the source has no name to use inside the destination")}
		}
		return at.Ino, srcName, nil
	}
	return t.ResolveParent(dst)
}

// Move moves src to dst, or into dst when dst is a directory, like mv: an
// existing file at the destination is replaced. It returns the path src
// has now. Nothing is copied.
func (t *Tx) Move(src, dst string) (string, error) {
	src, err := CleanPath(src)
	if err != nil {
		return "", err
	}
	dst, err = CleanPath(dst)
	if err != nil {
		return "", err
	}
	odir, oname, err := t.ResolveParent(src)
	if err != nil {
		return "", err
	}
	if _, err := t.Lookup(odir, oname); err != nil {
		return "", err
	}
	ndir, nname, err := t.Target(dst, oname)
	if err != nil {
		return "", err
	}
	if err := t.Rename(odir, oname, ndir, nname, 0); err != nil {
		return "", err
	}
	to, err := t.PathOf(ndir)
	return strings.TrimSuffix(to, "/") + "/" + nname, err
}

// Removed is what Remove did.
type Removed struct {
	Path    string `json:"path"`
	Existed bool   `json:"existed"`
	Removed int    `json:"removed"` // names removed, the path's own included
}

// Remove removes the file, symlink or directory at p, like rm: a
// directory needs recursive (NotAFile otherwise), symlinks are removed and
// never followed, and force makes a missing p not an error. The root
// cannot be removed (InvalidPath).
func (t *Tx) Remove(p string, recursive, force bool) (Removed, error) {
	clean, err := CleanPath(p)
	if err != nil {
		return Removed{}, err
	}
	if clean == "/" {
		return Removed{}, &errs.Error{Kind: errs.InvalidPath, Op: "rm", Path: clean,
			Err: errors.New("refusing to remove the vault root")}
	}
	r := Removed{Path: clean}
	dir, name, err := t.ResolveParent(clean)
	var at Attr
	if err == nil {
		at, err = t.Lookup(dir, name)
	}
	if force && errs.Is(err, errs.NotFound) {
		return r, nil
	}
	if err != nil {
		return Removed{}, err
	}
	r.Existed = true
	if at.Type == TypeDir && !recursive {
		return Removed{}, &errs.Error{Kind: errs.NotAFile, Op: "rm", Path: clean, Errno: syscall.EISDIR,
			Err: errors.New("is a directory"), Hint: "use rm -r to remove a directory and its content"}
	}
	r.Removed, err = t.RemoveAll(dir, name)
	return r, err
}

// Copied is what Copy did: the paths, and what CopyTree counted.
type Copied struct {
	From string
	To   string // the path of the copy
	CopyStats
}

// Copy copies src to dst, or into dst when dst is a directory, like cp: a
// directory needs recursive (NotAFile otherwise); with recursive, symlinks
// are copied as links, without it a symlink src is followed. Existing
// files are replaced, existing directories merged, modes kept, and file
// data is shared, not copied. A directory copied into itself or below it,
// and a file copied onto itself, are InvalidInput.
func (t *Tx) Copy(src, dst string, recursive bool) (Copied, error) {
	src, err := CleanPath(src)
	if err != nil {
		return Copied{}, err
	}
	dst, err = CleanPath(dst)
	if err != nil {
		return Copied{}, err
	}
	at, err := t.Resolve(src, !recursive)
	if err != nil {
		return Copied{}, err
	}
	if at.Type == TypeDir && !recursive {
		return Copied{}, &errs.Error{Kind: errs.NotAFile, Op: "cp", Path: src, Errno: syscall.EISDIR,
			Err: errors.New("is a directory"), Hint: "use cp -r to copy a directory"}
	}
	srcName := "/"
	if src != "/" {
		_, srcName = SplitPath(src)
	}
	dir, name, err := t.Target(dst, srcName)
	if err != nil {
		return Copied{}, err
	}
	if err := t.checkNotInside(at, dir, name); err != nil {
		return Copied{}, err
	}
	to, err := t.PathOf(dir)
	if err != nil {
		return Copied{}, err
	}
	st, err := t.CopyTree(at, dir, name)
	return Copied{From: src, To: strings.TrimSuffix(to, "/") + "/" + name, CopyStats: st}, err
}

// checkNotInside refuses a copy of a directory into itself or below it,
// and a copy of a file onto itself.
func (t *Tx) checkNotInside(src Attr, dir Ino, name string) error {
	if cur, err := t.Lookup(dir, name); err == nil && cur.Ino == src.Ino {
		return errs.New(errs.InvalidInput, "cp", "source and destination are the same file")
	}
	if src.Type != TypeDir {
		return nil
	}
	sp, err := t.PathOf(src.Ino)
	if err != nil {
		return err
	}
	dp, err := t.PathOf(dir)
	if err != nil {
		return err
	}
	if dp == sp || strings.HasPrefix(dp, strings.TrimSuffix(sp, "/")+"/") {
		return errs.New(errs.InvalidInput, "cp", "cannot copy a directory into itself")
	}
	return nil
}
