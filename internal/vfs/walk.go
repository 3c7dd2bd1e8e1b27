package vfs

import (
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// DirWalk is the memory of one recursive walk: the directories it has
// entered. In a sound vault every directory has exactly one name, so a walk
// down from any directory enters each directory below it once. A damaged
// vault can hold an entry naming an ancestor (a cycle) or a second name
// for a directory; a walk that went on would recurse until the stack
// overflows, or loop forever. Every walk over a tree enters directories
// through one DirWalk, and stops with CorruptVault at the first repeat.
type DirWalk struct {
	seen map[Ino]struct{}
}

// Enter records that the walk descends into directory ino. It returns a
// CorruptVault error when the walk has been in ino before.
func (w *DirWalk) Enter(ino Ino) error {
	if w.seen == nil {
		w.seen = map[Ino]struct{}{}
	}
	if _, ok := w.seen[ino]; ok {
		return corruptf("directory %d is reached twice in one walk: the vault holds a directory cycle "+
			"or a second name for a directory (run `avfs fsck`)", ino)
	}
	w.seen[ino] = struct{}{}
	return nil
}

// MaxDepth is how many directories deep a walk goes before it calls the
// tree damaged. Paths the kernel passes are at most 4096 bytes, so a sound
// tree reached through them is never near it; fsck and PathOf use it too.
const MaxDepth = 4096

// tooDeep reports a walk at path p that went past MaxDepth: walks that
// cannot keep a DirWalk (a diff meets one directory in two states) bound
// their depth instead.
func tooDeep(p string) error {
	if strings.Count(p, "/") <= MaxDepth {
		return nil
	}
	return corruptf("path %.64s... is deeper than %d directories: the vault holds a directory cycle "+
		"(run `avfs fsck`)", p, MaxDepth)
}

// RemoveAll removes dir/name and, when it is a directory, everything below
// it, like rm -r. It returns how many names it removed. A cycle below
// dir/name is CorruptVault, and then the caller's transaction must not
// commit.
func (t *Tx) RemoveAll(dir Ino, name string) (int, error) {
	at, err := t.Lookup(dir, name)
	if err != nil {
		return 0, err
	}
	return t.removeAll(&DirWalk{}, dir, name, at)
}

func (t *Tx) removeAll(w *DirWalk, dir Ino, name string, at Attr) (int, error) {
	if at.Type != TypeDir {
		return 1, t.Unlink(dir, name)
	}
	if err := w.Enter(at.Ino); err != nil {
		return 0, err
	}
	ents, err := t.ReadDir(at.Ino)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		cat, err := t.GetAttr(e.Ino)
		if err != nil {
			return n, err
		}
		m, err := t.removeAll(w, at.Ino, e.Name, cat)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n + 1, t.Rmdir(dir, name)
}

// CopyStats counts what a CopyTree copied.
type CopyStats struct {
	Files    int   // regular files and special files
	Dirs     int   // directories, the top one included
	Symlinks int   // symlinks, copied as links
	Bytes    int64 // bytes of the regular files, shared rather than written
}

// CopyTree copies the inode at (and, for a directory, everything below it)
// to dir/name, like cp -r: existing files are replaced, existing
// directories merged, modes kept, symlinks copied as links. File data is
// shared with the source, not copied. The caller checks that dir/name is
// not inside the source; a cycle in the source is CorruptVault.
func (t *Tx) CopyTree(at Attr, dir Ino, name string) (CopyStats, error) {
	var st CopyStats
	err := t.copyTree(&DirWalk{}, at, dir, name, &st)
	return st, err
}

func (t *Tx) copyTree(w *DirWalk, at Attr, dir Ino, name string, st *CopyStats) error {
	cur, err := t.Lookup(dir, name)
	exists := err == nil
	if err != nil && !errs.Is(err, errs.NotFound) {
		return err
	}
	if exists && (cur.Type == TypeDir) != (at.Type == TypeDir) {
		if cur.Type == TypeDir {
			return errs.E("cp", name, syscall.EISDIR)
		}
		return errs.E("cp", name, syscall.ENOTDIR)
	}
	if exists && cur.Type != TypeDir && (cur.Type != TypeFile || at.Type != TypeFile) {
		if err := t.Unlink(dir, name); err != nil {
			return err
		}
		exists = false
	}
	switch at.Type {
	case TypeDir:
		if err := w.Enter(at.Ino); err != nil {
			return err
		}
		st.Dirs++
		if !exists {
			if cur, err = t.Mkdir(dir, name, at.Mode, 0, 0); err != nil {
				return err
			}
		}
		ents, err := t.ReadDir(at.Ino)
		if err != nil {
			return err
		}
		for _, e := range ents {
			cat, err := t.GetAttr(e.Ino)
			if err != nil {
				return err
			}
			if err := t.copyTree(w, cat, cur.Ino, e.Name, st); err != nil {
				return err
			}
		}
		return nil
	case TypeFile:
		st.Files++
		if !exists {
			if cur, err = t.Create(dir, name, at.Mode, 0, 0); err != nil {
				return err
			}
		}
		mode := at.Mode
		if _, err := t.SetAttr(cur.Ino, SetAttr{Mode: &mode}); err != nil {
			return err
		}
		// The copy shares the source's chunks: no data is read or written.
		if err := t.CopyData(at.Ino, cur.Ino); err != nil {
			return err
		}
		st.Bytes += int64(at.Size)
		return nil
	case TypeSymlink:
		st.Symlinks++
		target, err := t.Readlink(at.Ino)
		if err != nil {
			return err
		}
		_, err = t.Symlink(dir, name, target, 0, 0)
		return err
	default:
		st.Files++
		_, err := t.Mknod(dir, name, NewNode{Type: at.Type, Mode: at.Mode, Rdev: at.Rdev})
		return err
	}
}
