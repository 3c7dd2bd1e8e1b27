package fusefs

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Files unlinked while open. The kernel is told to skip OPEN and RELEASE,
// so the mount cannot count open files; it knows instead when the kernel
// lets go of an inode (FORGET), which happens once no file descriptor,
// mapping or name refers to it. A file that loses its last name becomes
// an orphan in the vault (vfs.SetKeepOrphans) and is released then.
// Orphans left by a crash are released when the vault is next mounted.

// orphanState is kept per node.
type orphanState struct {
	orphan atomic.Bool // the node's inode is an orphan in the vault
}

// adopt marks the node the kernel holds for ino as an orphan, to be
// released when forgotten; with no such node it is released now.
func (f *fsys) adopt(in *fs.Inode, ino vfs.Ino) {
	if in != nil {
		if c, ok := in.Operations().(*node); ok && c.ino() == ino {
			c.orphan.Store(true)
			return
		}
	}
	f.release(ino)
}

// release drops orphan ino and what the write-back cache holds of it.
func (f *fsys) release(ino vfs.Ino) {
	f.wb.drop(ino)
	_ = f.update("release", func(tx *vfs.Tx) error {
		_, err := tx.ReleaseOrphan(ino)
		return err
	})
}

// OnForget releases the node's inode if it is an orphan: the kernel holds
// it no more, so neither does any program.
func (n *node) OnForget() {
	if n.orphan.Load() {
		n.fs.release(n.ino())
	}
}

// releaseOrphans drops every orphan of the vault: at mount, those a crash
// left; at unmount, those still open when the mount went away.
func releaseOrphans(st *store) error {
	var found bool
	if err := st.view(func(tx *vfs.Tx) error {
		orphans, err := tx.Orphans()
		found = len(orphans) > 0
		return err
	}); err != nil || !found {
		return err // most often none: no write transaction, no sync
	}
	return st.update(func(tx *vfs.Tx) error {
		orphans, err := tx.Orphans()
		for _, ino := range orphans {
			if err == nil {
				_, err = tx.ReleaseOrphan(ino)
			}
		}
		return err
	})
}
