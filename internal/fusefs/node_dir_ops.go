package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// create makes a new inode under n with mk and returns its node.
func (n *node) create(ctx context.Context, op string, out *fuse.EntryOut, mk func(tx *vfs.Tx, uid, gid uint32) (vfs.Attr, error)) (*fs.Inode, syscall.Errno) {
	uid, gid := caller(ctx)
	var a vfs.Attr
	errno := n.fs.update(op, func(tx *vfs.Tx) (err error) {
		a, err = mk(tx, uid, gid)
		return err
	})
	if errno != 0 {
		return nil, errno
	}
	return n.child(ctx, a, out), 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(ctx, "mkdir", out, func(tx *vfs.Tx, uid, gid uint32) (vfs.Attr, error) {
		return tx.Mkdir(n.ino(), name, mode&0o7777, uid, gid)
	})
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	typ := fileType(mode)
	if typ == 0 || typ == vfs.TypeSymlink || typ == vfs.TypeDir {
		return nil, syscall.EINVAL
	}
	return n.create(ctx, "mknod", out, func(tx *vfs.Tx, uid, gid uint32) (vfs.Attr, error) {
		return tx.Mknod(n.ino(), name, vfs.NewNode{Type: typ, Mode: mode & 0o7777, Uid: uid, Gid: gid, Rdev: dev})
	})
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(ctx, "symlink", out, func(tx *vfs.Tx, uid, gid uint32) (vfs.Attr, error) {
		return tx.Symlink(n.ino(), name, target, uid, gid)
	})
}

// Create answers ENOSYS: the kernel then stops sending CREATE and makes
// files with MKNOD, then opens them itself (no_open), which saves the
// RELEASE round trip that every CREATE is followed by. O_EXCL and O_TRUNC
// keep their meaning: the kernel turns them into MKNOD's EEXIST and a
// SETATTR of the size.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.ENOSYS
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	errno := n.fs.update("link", func(tx *vfs.Tx) error {
		_, err := tx.Link(t.ino(), n.ino(), name)
		return err
	})
	if errno != 0 {
		return nil, errno
	}
	// The file may have buffered writes: its size is the buffer's.
	a, errno := n.fs.wb.attrs(func() (a vfs.Attr, errno syscall.Errno) {
		errno = n.fs.view("link", func(tx *vfs.Tx) (err error) {
			a, err = tx.GetAttr(t.ino())
			return err
		})
		return a, errno
	})
	if errno != 0 {
		return nil, errno
	}
	return n.child(ctx, a, out), 0
}

// Unlink removes a name. A file that loses its last name stays in the
// vault as an orphan while the kernel holds it (a program may have it
// open): it is released when the kernel forgets it (OnForget).
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	child := n.GetChild(name)
	var orphan vfs.Ino
	errno := n.fs.update("unlink", func(tx *vfs.Tx) error {
		a, err := tx.Lookup(n.ino(), name)
		if err != nil {
			return err
		}
		if err := tx.Unlink(n.ino(), name); err != nil {
			return err
		}
		orphan = orphaned(tx, a)
		return nil
	})
	if errno == 0 && orphan != 0 {
		n.fs.adopt(child, orphan)
	}
	return errno
}

// orphaned is a's inode if the change made it an orphan (a regular file
// with no name left), else 0.
func orphaned(tx *vfs.Tx, a vfs.Attr) vfs.Ino {
	if a.Type != vfs.TypeFile {
		return 0
	}
	if now, err := tx.GetAttr(a.Ino); err == nil && now.Nlink == 0 {
		return a.Ino
	}
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.fs.update("rmdir", func(tx *vfs.Tx) error {
		return tx.Rmdir(n.ino(), name)
	})
}

// Rename supports RENAME_NOREPLACE and RENAME_EXCHANGE; other flags
// (RENAME_WHITEOUT) are EINVAL, as the model refuses them.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	replaced := np.GetChild(newName)
	var orphan vfs.Ino
	errno := n.fs.update("rename", func(tx *vfs.Tx) error {
		target, terr := tx.Lookup(np.ino(), newName)
		if err := tx.Rename(n.ino(), name, np.ino(), newName, flags); err != nil {
			return err
		}
		if terr == nil {
			orphan = orphaned(tx, target)
		}
		return nil
	})
	if errno == 0 && orphan != 0 {
		n.fs.adopt(replaced, orphan)
	}
	return errno
}
