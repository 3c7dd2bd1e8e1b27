package fusefs

import (
	"context"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Getxattr copies the value into dest; with an empty dest it reports the
// size, and ERANGE when dest is too small, as getxattr(2).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	var val []byte
	errno := n.fs.view("getxattr", func(tx *vfs.Tx) (err error) {
		val, err = tx.GetXattr(n.ino(), attr)
		return err
	})
	if errno != 0 {
		return 0, errno
	}
	if len(dest) == 0 {
		return uint32(len(val)), 0
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

// Setxattr sets an attribute. Its name and value count against
// max_size_mb beside the write-back cache's reservations, so that no
// buffered write is left without room.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	var growth int64
	if errno := n.fs.view("setxattr", func(tx *vfs.Tx) (err error) {
		growth, err = tx.XattrGrowth(n.ino(), attr, data)
		return err
	}); errno != 0 {
		return errno
	}
	return n.fs.wb.reserveGrowth(growth, func() syscall.Errno {
		return n.fs.update("setxattr", func(tx *vfs.Tx) error {
			return tx.SetXattr(n.ino(), attr, data, flags)
		})
	})
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.fs.update("removexattr", func(tx *vfs.Tx) error {
		return tx.RemoveXattr(n.ino(), attr)
	})
}

// Listxattr writes the names NUL-terminated into dest, with the same size
// protocol as Getxattr.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var names []string
	errno := n.fs.view("listxattr", func(tx *vfs.Tx) (err error) {
		names, err = tx.ListXattr(n.ino())
		return err
	})
	if errno != 0 {
		return 0, errno
	}
	var buf []byte
	for _, name := range names {
		buf = append(append(buf, name...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(buf)), 0
	}
	if len(dest) < len(buf) {
		return uint32(len(buf)), syscall.ERANGE
	}
	return uint32(copy(dest, buf)), 0
}
