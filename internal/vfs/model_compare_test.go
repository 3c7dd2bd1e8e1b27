package vfs_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// compareTree walks a state from the root and compares it with the model:
// names, types, modes, data, symlink targets, xattrs, link counts, hard-link
// identity and the usage counters.
func compareTree(tx *vfs.Tx, root *mnode) error {
	inoOf := map[*mnode]vfs.Ino{}
	nodeOf := map[vfs.Ino]*mnode{}
	names := map[*mnode]int{}
	var usage vfs.Usage
	var walk func(p string, ino vfs.Ino, n *mnode) error
	walk = func(p string, ino vfs.Ino, n *mnode) error {
		names[n]++
		if seen, ok := inoOf[n]; ok {
			if seen != ino {
				return fmt.Errorf("%s: inode %d, but the model's hard link is inode %d", p, ino, seen)
			}
			return nil
		}
		if other, ok := nodeOf[ino]; ok && other != n {
			return fmt.Errorf("%s: inode %d is also another file of the model", p, ino)
		}
		inoOf[n], nodeOf[ino] = ino, n
		a, err := tx.GetAttr(ino)
		if err != nil {
			return fmt.Errorf("%s: getattr: %v", p, err)
		}
		if a.Type != n.typ || a.Mode != n.mode {
			return fmt.Errorf("%s: %s mode %#o, want %s mode %#o", p, a.Type, a.Mode, n.typ, n.mode)
		}
		if ino != vfs.RootIno {
			usage.Files++
		}
		for name, v := range n.xattrs {
			usage.Bytes += int64(len(name) + len(v))
		}
		if err := compareXattrs(tx, ino, n); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		switch n.typ {
		case vfs.TypeFile:
			usage.Bytes += int64(len(n.data))
			if a.Size != uint64(len(n.data)) {
				return fmt.Errorf("%s: size %d, want %d", p, a.Size, len(n.data))
			}
			buf := make([]byte, len(n.data)+10)
			got, err := tx.Read(ino, 0, buf)
			if err != nil {
				return fmt.Errorf("%s: read: %v", p, err)
			}
			if !bytes.Equal(buf[:got], n.data) {
				return fmt.Errorf("%s: content differs (%d bytes read, want %d; first difference at %d)",
					p, got, len(n.data), firstDiff(buf[:got], n.data))
			}
		case vfs.TypeSymlink:
			target, err := tx.Readlink(ino)
			if err != nil || target != n.target {
				return fmt.Errorf("%s: readlink = %q, %v; want %q", p, target, err, n.target)
			}
		case vfs.TypeDir:
			entries, err := tx.ReadDir(ino)
			if err != nil {
				return fmt.Errorf("%s: readdir: %v", p, err)
			}
			var got []string
			subdirs := uint32(0)
			for _, e := range entries {
				got = append(got, e.Name)
				k := n.kids[e.Name]
				if k == nil {
					continue
				}
				if e.Type != k.typ {
					return fmt.Errorf("%s: entry %q says %s, want %s", p, e.Name, e.Type, k.typ)
				}
				if k.typ == vfs.TypeDir {
					subdirs++
				}
				if err := walk(joinModelPath(p, e.Name), e.Ino, k); err != nil {
					return err
				}
			}
			if want := slices.Sorted(maps.Keys(n.kids)); !slices.Equal(got, want) {
				return fmt.Errorf("%s: entries %q, want %q", p, got, want)
			}
			if a.Nlink != 2+subdirs {
				return fmt.Errorf("%s: nlink %d, want %d", p, a.Nlink, 2+subdirs)
			}
		}
		return nil
	}
	if err := walk("/", vfs.RootIno, root); err != nil {
		return err
	}
	for n, count := range names {
		if n.typ == vfs.TypeDir {
			continue
		}
		a, err := tx.GetAttr(inoOf[n])
		if err != nil {
			return err
		}
		if int(a.Nlink) != count {
			return fmt.Errorf("inode %d: nlink %d, want %d names", inoOf[n], a.Nlink, count)
		}
	}
	got, err := tx.Usage()
	if err != nil {
		return err
	}
	if got != usage {
		return fmt.Errorf("usage %+v, want %+v", got, usage)
	}
	return nil
}

func compareXattrs(tx *vfs.Tx, ino vfs.Ino, n *mnode) error {
	names, err := tx.ListXattr(ino)
	if err != nil {
		return fmt.Errorf("listxattr: %v", err)
	}
	if want := slices.Sorted(maps.Keys(n.xattrs)); !slices.Equal(names, want) {
		return fmt.Errorf("xattrs %q, want %q", names, want)
	}
	for _, name := range names {
		v, err := tx.GetXattr(ino, name)
		if err != nil || !bytes.Equal(v, n.xattrs[name]) {
			return fmt.Errorf("xattr %s = %q, %v; want %q", name, v, err, n.xattrs[name])
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
