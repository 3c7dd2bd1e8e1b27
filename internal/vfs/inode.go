package vfs

import (
	"bytes"
	"slices"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// inode loads an inode record; ENOENT when the state does not hold it.
func (t *Tx) inode(ino Ino) (*inode, error) {
	b, ok := t.putInodes[ino]
	if !ok {
		var err error
		if b, _, ok, err = t.get(inodeVKey(ino)); err != nil {
			return nil, err
		}
	}
	if !ok {
		return nil, errs.E("stat", "", syscall.ENOENT)
	}
	n, err := decodeInode(ino, b)
	if err != nil {
		return nil, corruptf("inode %d: %v", ino, err)
	}
	return n, nil
}

// putInode writes n's record in the top layer. A write transaction
// remembers the records it put (Tx.putInodes): it reads them back without
// the engine and does not write one again unchanged, nor journal it twice.
// A dir's record is put after each name made in it, unchanged after the
// first in one transaction; an ingest of 10,000 new files made 10,000
// such puts.
func (t *Tx) putInode(n *inode) error {
	vkey, enc := inodeVKey(n.Ino), encodeInode(n)
	prev, put := t.putInodes[n.Ino]
	if put && bytes.Equal(prev, enc) {
		return nil
	}
	var err error
	if put {
		// Journaled by the first put; only the version changes.
		err = t.own().Put(versionKey(vkey, t.top), enc)
		if err == nil {
			t.wrote(vkey, enc, t.top, true)
		}
	} else {
		err = t.put(vkey, enc)
	}
	if err != nil {
		delete(t.putInodes, n.Ino)
		return err
	}
	if t.putInodes == nil {
		t.putInodes = map[Ino][]byte{}
	}
	t.putInodes[n.Ino] = enc
	return nil
}

// delInode deletes ino's record from the state.
func (t *Tx) delInode(ino Ino) error {
	delete(t.putInodes, ino)
	return t.del(inodeVKey(ino))
}

// GetAttr returns an inode's attributes.
func (t *Tx) GetAttr(ino Ino) (Attr, error) {
	n, err := t.inode(ino)
	if err != nil {
		return Attr{}, err
	}
	return n.Attr, nil
}

// SetAttr is a change of attributes; nil fields stay as they are.
type SetAttr struct {
	Mode  *uint32
	Uid   *uint32
	Gid   *uint32
	Size  *uint64
	Atime *time.Time
	Mtime *time.Time
}

// SetAttr changes mode, owner, size and times, as chmod, chown, truncate
// and utimens do. ctime becomes the transaction's time.
func (t *Tx) SetAttr(ino Ino, s SetAttr) (Attr, error) {
	if err := t.writable("setattr"); err != nil {
		return Attr{}, err
	}
	n, err := t.inode(ino)
	if err != nil {
		return Attr{}, err
	}
	if s.Size != nil {
		if n.Type == TypeDir {
			return Attr{}, errs.E("truncate", "", syscall.EISDIR)
		}
		if n.Type != TypeFile {
			return Attr{}, errs.E("truncate", "", syscall.EINVAL)
		}
		if err := t.truncate(n, *s.Size); err != nil {
			return Attr{}, err
		}
		n.Mtime = t.now
	}
	if s.Mode != nil {
		n.Mode = *s.Mode & 0o7777
	}
	if s.Uid != nil {
		n.Uid = *s.Uid
	}
	if s.Gid != nil {
		n.Gid = *s.Gid
	}
	if s.Atime != nil {
		n.Atime = *s.Atime
	}
	if s.Mtime != nil {
		n.Mtime = *s.Mtime
	}
	n.Ctime = t.now
	if err := t.putInode(n); err != nil {
		return Attr{}, err
	}
	return n.Attr, nil
}

// removeLink drops one name from an inode's link list.
func (n *inode) removeLink(parent Ino, name string) {
	i := slices.Index(n.links, link{Parent: parent, Name: name})
	if i >= 0 {
		n.links = slices.Delete(n.links, i, i+1)
	}
}

// dropInode deletes an inode that lost its last name, with its data and
// xattrs, and gives its usage back.
func (t *Tx) dropInode(n *inode) error {
	var dBytes int64
	if n.Type == TypeFile {
		dBytes = -int64(n.Size)
		if err := t.dropTopVersions(u64([]byte{prefixFile}, uint64(n.Ino))); err != nil {
			return err
		}
	}
	xb, err := t.xattrUsage(n.Ino)
	if err != nil {
		return err
	}
	dBytes -= xb
	if err := t.dropTopVersions(xattrInoPrefix(n.Ino)); err != nil {
		return err
	}
	if err := t.charge("unlink", "", dBytes, -1); err != nil {
		return err
	}
	return t.delInode(n.Ino)
}

// dropTopVersions deletes the top layer's versions of every record under
// prefix. Lower layers' versions need no whiteout: nothing in this state
// reaches them once their inode is gone, and inode numbers are never reused.
func (t *Tx) dropTopVersions(prefix []byte) error {
	var keys [][]byte
	err := t.own().Scan(prefix, kv.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
		if _, layer, ok := splitVersion(k); ok && layer == t.top {
			keys = append(keys, slices.Clone(k))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		vkey, _, _ := splitVersion(k)
		if err := t.own().Delete(k); err != nil {
			return err
		}
		if t.rc.c != nil { // a lower layer's version may show again
			t.rc.c.forget(vkey)
		}
		if err := t.own().Delete(journalKey(t.top, vkey)); err != nil {
			return err
		}
	}
	return nil
}
