package vfs

import (
	"errors"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// maxSymlinks is how many symlinks one resolution follows before ELOOP, as Linux.
const maxSymlinks = 40

// CleanPath turns a vault path into its canonical absolute form ("/" or
// "/a/b"). Paths are relative to the vault root whether or not they start
// with "/". A ".." that would climb above the root is refused: a vault
// path can never name anything outside the vault.
func CleanPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", &errs.Error{Kind: errs.InvalidPath, Path: p, Err: errors.New("path contains a NUL byte")}
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "", &errs.Error{Kind: errs.InvalidPath, Path: p, Err: errors.New("path escapes the vault root")}
			}
			parts = parts[:len(parts)-1]
		default:
			if len(c) > NameMax {
				return "", errs.E("", p, syscall.ENAMETOOLONG)
			}
			parts = append(parts, c)
		}
	}
	return "/" + strings.Join(parts, "/"), nil
}

// SplitPath splits a clean path into its parent and last name.
func SplitPath(clean string) (dir, name string) {
	i := strings.LastIndexByte(clean, '/')
	if i <= 0 {
		return "/", clean[i+1:]
	}
	return clean[:i], clean[i+1:]
}

// Resolve returns the inode at path p. Symlinks along the way are followed,
// the last one only when follow is set. Symlink targets resolve inside the
// vault: an absolute target starts at the vault root and ".." stops there.
func (t *Tx) Resolve(p string, follow bool) (Attr, error) {
	clean, err := CleanPath(p)
	if err != nil {
		return Attr{}, err
	}
	links := 0
	n, err := t.walk(RootIno, clean, follow, &links)
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			e.Path = clean
		}
		return Attr{}, err
	}
	return n.Attr, nil
}

// walk resolves path p starting at directory dir.
func (t *Tx) walk(dir Ino, p string, follow bool, links *int) (*inode, error) {
	cur, err := t.inode(dir)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(p, "/")
	for i, name := range parts {
		last := i == len(parts)-1
		switch name {
		case "", ".":
			continue
		case "..":
			if cur.Ino != RootIno && len(cur.links) > 0 {
				if cur, err = t.inode(cur.links[0].Parent); err != nil {
					return nil, err
				}
			}
			continue
		}
		if cur.Type != TypeDir {
			return nil, errs.E("lookup", "", syscall.ENOTDIR)
		}
		ino, _, ok, err := t.entry(cur.Ino, name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errs.E("lookup", "", syscall.ENOENT)
		}
		next, err := t.inode(ino)
		if err != nil {
			return nil, err
		}
		if next.Type == TypeSymlink && (!last || follow) {
			if *links++; *links > maxSymlinks {
				return nil, errs.E("lookup", "", syscall.ELOOP)
			}
			start := cur.Ino
			if strings.HasPrefix(next.target, "/") {
				start = RootIno
			}
			if next, err = t.walk(start, next.target, true, links); err != nil {
				return nil, err
			}
		}
		cur = next
	}
	return cur, nil
}

// ResolveParent resolves the directory that holds path p and returns it
// with p's last name. The root has no parent: InvalidPath.
func (t *Tx) ResolveParent(p string) (Ino, string, error) {
	clean, err := CleanPath(p)
	if err != nil {
		return 0, "", err
	}
	if clean == "/" {
		return 0, "", &errs.Error{Kind: errs.InvalidPath, Path: clean, Errno: syscall.EINVAL,
			Err: errors.New("the root has no parent")}
	}
	d, name := SplitPath(clean)
	dir, err := t.Resolve(d, true)
	if err != nil {
		return 0, "", err
	}
	if dir.Type != TypeDir {
		return 0, "", errs.E("lookup", d, syscall.ENOTDIR)
	}
	return dir.Ino, name, nil
}

// PathOf returns a path of inode ino in this state: its first name, and
// its parents' names up to the root.
func (t *Tx) PathOf(ino Ino) (string, error) { return newMemo(t).pathOf(ino) }

// MkdirAll creates directory p and any missing parents, like mkdir -p.
func (t *Tx) MkdirAll(p string, mode uint32) (Attr, error) {
	clean, err := CleanPath(p)
	if err != nil {
		return Attr{}, err
	}
	cur, err := t.GetAttr(RootIno)
	if err != nil {
		return Attr{}, err
	}
	so := "/"
	for _, name := range strings.Split(clean, "/")[1:] {
		if name == "" {
			continue
		}
		so = strings.TrimSuffix(so, "/") + "/" + name
		next, err := t.Resolve(so, true)
		switch {
		case err == nil:
			if next.Type != TypeDir {
				return Attr{}, errs.E("mkdir", so, syscall.ENOTDIR)
			}
		case errs.Is(err, errs.NotFound):
			if next, err = t.Mkdir(cur.Ino, name, mode, 0, 0); err != nil {
				return Attr{}, err
			}
		default:
			return Attr{}, err
		}
		cur = next
	}
	return cur, nil
}

// WriteFile creates or replaces the file at p with data, like os.WriteFile.
func (t *Tx) WriteFile(p string, data []byte, mode uint32) (Attr, error) {
	dir, name, err := t.ResolveParent(p)
	if err != nil {
		return Attr{}, err
	}
	a, err := t.Lookup(dir, name)
	if errs.Is(err, errs.NotFound) {
		a, err = t.Create(dir, name, mode, 0, 0)
	} else if err == nil && a.Type == TypeSymlink {
		a, err = t.Resolve(p, true)
	}
	if err != nil {
		return Attr{}, err
	}
	if a.Type != TypeFile {
		return Attr{}, errs.E("write", p, syscall.EISDIR)
	}
	zero := uint64(0)
	if _, err := t.SetAttr(a.Ino, SetAttr{Size: &zero}); err != nil {
		return Attr{}, err
	}
	if _, err := t.Write(a.Ino, 0, data); err != nil {
		return Attr{}, err
	}
	return t.GetAttr(a.Ino)
}

// ReadFile returns the whole content of the file at p.
func (t *Tx) ReadFile(p string) ([]byte, error) {
	a, err := t.Resolve(p, true)
	if err != nil {
		return nil, err
	}
	if a.Type != TypeFile {
		return nil, errs.E("read", p, syscall.EISDIR)
	}
	buf := make([]byte, a.Size)
	n, err := t.Read(a.Ino, 0, buf)
	return buf[:n], err
}
