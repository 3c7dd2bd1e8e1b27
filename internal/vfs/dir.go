package vfs

import (
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// NameMax is the longest name a directory entry may have, in bytes.
const NameMax = 255

// SymlinkMax is the longest symlink target, in bytes.
const SymlinkMax = 4095

// checkName validates one path component.
func checkName(op, name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return &errs.Error{Kind: errs.InvalidPath, Op: op, Path: name, Errno: syscall.EINVAL}
	case len(name) > NameMax:
		return errs.E(op, name, syscall.ENAMETOOLONG)
	case strings.ContainsAny(name, "/\x00"):
		return &errs.Error{Kind: errs.InvalidPath, Op: op, Path: name, Errno: syscall.EINVAL}
	}
	return nil
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name string
	Ino  Ino
	Type FileType
}

// dirInode loads ino and checks it is a directory.
func (t *Tx) dirInode(op string, ino Ino) (*inode, error) {
	n, err := t.inode(ino)
	if err != nil {
		return nil, err
	}
	if n.Type != TypeDir {
		return nil, errs.E(op, "", syscall.ENOTDIR)
	}
	return n, nil
}

// entry looks a name up in a directory; ok is false when it is absent.
func (t *Tx) entry(dir Ino, name string) (Ino, FileType, bool, error) {
	b, _, ok, err := t.get(dentryVKey(dir, name))
	if err != nil || !ok {
		return 0, 0, false, err
	}
	ino, typ, err := decodeDentry(b)
	if err != nil {
		return 0, 0, false, corruptf("entry %q in directory %d: %v", name, dir, err)
	}
	return ino, typ, true, nil
}

// Lookup finds name in directory dir.
func (t *Tx) Lookup(dir Ino, name string) (Attr, error) {
	if err := checkName("lookup", name); err != nil {
		return Attr{}, err
	}
	if _, err := t.dirInode("lookup", dir); err != nil {
		return Attr{}, err
	}
	ino, _, ok, err := t.entry(dir, name)
	if err != nil {
		return Attr{}, err
	}
	if !ok {
		return Attr{}, errs.E("lookup", name, syscall.ENOENT)
	}
	return t.GetAttr(ino)
}

// NewNode describes an inode to create.
type NewNode struct {
	Type   FileType
	Mode   uint32
	Uid    uint32
	Gid    uint32
	Rdev   uint32
	Target string // symlink target
	// Atime and Mtime, when not zero, are the new inode's times instead
	// of the transaction's: an ingest makes a file as the host has it in
	// one write instead of two.
	Atime, Mtime time.Time
}

// Mknod creates a new inode of any type under dir/name. It fails with
// EEXIST when the name is taken.
func (t *Tx) Mknod(dir Ino, name string, nn NewNode) (Attr, error) {
	op := "create"
	if err := t.writable(op); err != nil {
		return Attr{}, err
	}
	if err := checkName(op, name); err != nil {
		return Attr{}, err
	}
	if nn.Type < TypeDir || nn.Type > TypeBlock {
		return Attr{}, errs.E(op, name, syscall.EINVAL)
	}
	if nn.Type == TypeSymlink && len(nn.Target) > SymlinkMax {
		return Attr{}, errs.E("symlink", name, syscall.ENAMETOOLONG)
	}
	if nn.Type == TypeSymlink && nn.Target == "" {
		return Attr{}, errs.E("symlink", name, syscall.ENOENT)
	}
	parent, err := t.dirInode(op, dir)
	if err != nil {
		return Attr{}, err
	}
	if _, _, ok, err := t.entry(dir, name); err != nil {
		return Attr{}, err
	} else if ok {
		return Attr{}, errs.E(op, name, syscall.EEXIST)
	}
	if err := t.charge(op, name, 0, 1); err != nil {
		return Attr{}, err
	}
	id, err := t.nextIno()
	if err != nil {
		return Attr{}, err
	}
	at, mt := t.now, t.now
	if !nn.Atime.IsZero() {
		at = nn.Atime
	}
	if !nn.Mtime.IsZero() {
		mt = nn.Mtime
	}
	n := &inode{Attr: Attr{Ino: Ino(id), Type: nn.Type, Mode: nn.Mode & 0o7777, Uid: nn.Uid, Gid: nn.Gid,
		Nlink: 1, Rdev: nn.Rdev, Atime: at, Mtime: mt, Ctime: t.now},
		target: nn.Target, links: []link{{Parent: dir, Name: name}}, birth: birthOf(t.v.hdr.VaultID)}
	switch nn.Type {
	case TypeDir:
		n.Nlink = 2
		parent.Nlink++
	case TypeSymlink:
		n.Size = uint64(len(nn.Target))
	}
	if err := t.putInode(n); err != nil {
		return Attr{}, err
	}
	t.created(n.Ino, n.Type == TypeDir)
	if err := t.put(dentryVKey(dir, name), encodeDentry(n.Ino, n.Type)); err != nil {
		return Attr{}, err
	}
	parent.Mtime, parent.Ctime = t.now, t.now
	if err := t.putInode(parent); err != nil {
		return Attr{}, err
	}
	return n.Attr, nil
}

// Mkdir creates a directory.
func (t *Tx) Mkdir(dir Ino, name string, mode, uid, gid uint32) (Attr, error) {
	return t.Mknod(dir, name, NewNode{Type: TypeDir, Mode: mode, Uid: uid, Gid: gid})
}

// Create creates an empty regular file.
func (t *Tx) Create(dir Ino, name string, mode, uid, gid uint32) (Attr, error) {
	return t.Mknod(dir, name, NewNode{Type: TypeFile, Mode: mode, Uid: uid, Gid: gid})
}

// Symlink creates a symbolic link to target.
func (t *Tx) Symlink(dir Ino, name, target string, uid, gid uint32) (Attr, error) {
	return t.Mknod(dir, name, NewNode{Type: TypeSymlink, Mode: 0o777, Uid: uid, Gid: gid, Target: target})
}

// Readlink returns a symlink's target.
func (t *Tx) Readlink(ino Ino) (string, error) {
	n, err := t.inode(ino)
	if err != nil {
		return "", err
	}
	if n.Type != TypeSymlink {
		return "", errs.E("readlink", "", syscall.EINVAL)
	}
	return n.target, nil
}

// Link gives inode ino another name, dir/name (a hard link).
func (t *Tx) Link(ino, dir Ino, name string) (Attr, error) {
	op := "link"
	if err := t.writable(op); err != nil {
		return Attr{}, err
	}
	if err := checkName(op, name); err != nil {
		return Attr{}, err
	}
	n, err := t.inode(ino)
	if err != nil {
		return Attr{}, err
	}
	if n.Type == TypeDir {
		return Attr{}, errs.E(op, name, syscall.EPERM)
	}
	if n.Nlink == 0 {
		return Attr{}, errs.E(op, name, syscall.ENOENT) // an orphan, as link(2) of an unlinked file
	}
	parent, err := t.dirInode(op, dir)
	if err != nil {
		return Attr{}, err
	}
	if _, _, ok, err := t.entry(dir, name); err != nil {
		return Attr{}, err
	} else if ok {
		return Attr{}, errs.E(op, name, syscall.EEXIST)
	}
	n.Nlink++
	n.links = append(n.links, link{Parent: dir, Name: name})
	n.Ctime = t.now
	if err := t.putInode(n); err != nil {
		return Attr{}, err
	}
	if err := t.put(dentryVKey(dir, name), encodeDentry(n.Ino, n.Type)); err != nil {
		return Attr{}, err
	}
	parent.Mtime, parent.Ctime = t.now, t.now
	return n.Attr, t.putInode(parent)
}

// Unlink removes a non-directory name. The inode goes with its last name.
func (t *Tx) Unlink(dir Ino, name string) error {
	return t.remove("unlink", dir, name, false)
}

// Rmdir removes an empty directory.
func (t *Tx) Rmdir(dir Ino, name string) error {
	return t.remove("rmdir", dir, name, true)
}

func (t *Tx) remove(op string, dir Ino, name string, wantDir bool) error {
	if err := t.writable(op); err != nil {
		return err
	}
	if err := checkName(op, name); err != nil {
		return err
	}
	parent, err := t.dirInode(op, dir)
	if err != nil {
		return err
	}
	ino, typ, ok, err := t.entry(dir, name)
	if err != nil {
		return err
	}
	if !ok {
		return errs.E(op, name, syscall.ENOENT)
	}
	if wantDir && typ != TypeDir {
		return errs.E(op, name, syscall.ENOTDIR)
	}
	if !wantDir && typ == TypeDir {
		return errs.E(op, name, syscall.EISDIR)
	}
	n, err := t.inode(ino)
	if err != nil {
		return err
	}
	if wantDir {
		if empty, err := t.isEmpty(ino); err != nil {
			return err
		} else if !empty {
			return errs.E(op, name, syscall.ENOTEMPTY)
		}
	}
	if err := t.unlinkEntry(parent, name, n); err != nil {
		return err
	}
	return t.putInode(parent)
}

// unlinkEntry removes parent/name, which names n, and drops n with its
// last name. The caller stores parent.
func (t *Tx) unlinkEntry(parent *inode, name string, n *inode) error {
	if err := t.del(dentryVKey(parent.Ino, name)); err != nil {
		return err
	}
	parent.Mtime, parent.Ctime = t.now, t.now
	n.removeLink(parent.Ino, name)
	if n.Type == TypeDir {
		parent.Nlink--
		return t.dropInode(n)
	}
	n.Nlink--
	if n.Nlink == 0 {
		if n.Type == TypeFile && t.v.keepOrphans {
			return t.orphan(n)
		}
		return t.dropInode(n)
	}
	n.Ctime = t.now
	return t.putInode(n)
}

func (t *Tx) isEmpty(dir Ino) (bool, error) {
	empty := true
	err := t.scanDir(dir, func(DirEntry) bool {
		empty = false
		return false
	})
	return empty, err
}

// ReadDir lists a directory, sorted by name ("." and ".." are not listed).
func (t *Tx) ReadDir(dir Ino) ([]DirEntry, error) {
	if _, err := t.dirInode("readdir", dir); err != nil {
		return nil, err
	}
	var out []DirEntry
	err := t.scanDir(dir, func(e DirEntry) bool {
		out = append(out, e)
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(t.c.segs) > 1 {
		slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// scanDir calls fn for each live entry of dir until it returns false. With
// one segment entries come in name order; across segments, a name decided
// by a nearer segment (even as deleted) hides the farther ones.
func (t *Tx) scanDir(dir Ino, fn func(DirEntry) bool) error {
	prefix := dentryDirPrefix(dir)
	end := kv.PrefixEnd(prefix)
	decided := map[string]bool{}
	multi := len(t.c.segs) > 1
	stop := false
	for i := range t.c.segs {
		layers := t.c.segs[i].layers
		var cur []byte // vkey of the record whose version was found
		err := t.txs[i].Scan(prefix, end, func(k, v []byte) (bool, error) {
			vkey, layer, ok := splitVersion(k)
			if !ok || !layers[layer] || (cur != nil && string(vkey) == string(cur)) {
				return true, nil
			}
			cur = slices.Clone(vkey)
			name := vkeyName(vkey)
			if multi {
				if decided[name] {
					return true, nil
				}
				decided[name] = true
			}
			if len(v) == 0 {
				return true, nil
			}
			ino, typ, err := decodeDentry(v)
			if err != nil {
				return false, corruptf("entry %q in directory %d: %v", name, dir, err)
			}
			if !fn(DirEntry{Name: name, Ino: ino, Type: typ}) {
				stop = true
				return false, nil
			}
			return true, nil
		})
		if err != nil || stop {
			return err
		}
	}
	return nil
}
