package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Open answers ENOSYS: the kernel then stops sending OPEN and RELEASE for
// every file of the mount (no_open), keeps the page cache across opens,
// and serves reads and writes through the handleless Read and Write
// below. The per-file open and close round trips are what made small-file
// reads 4–6× slower than native disk (docs/architecture.md, "Mount").
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ENOSYS
}

// Flush answers ENOSYS, so the kernel stops sending FLUSH on close
// (no_flush). Nothing waits for it: buffered writes are persisted in the
// background, on fsync and at unmount (writeback.go).
func (n *node) Flush(ctx context.Context, _ fs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}

func (n *node) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if got, ok, errno := n.fs.wb.read(n.ino(), dest, off); ok {
		if errno != 0 {
			return nil, errno
		}
		return fuse.ReadResultData(dest[:got]), 0
	}
	var got int
	errno := n.fs.view("read", func(tx *vfs.Tx) (err error) {
		got, err = tx.Read(n.ino(), off, dest)
		return err
	})
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:got]), 0
}

// Write writes at the offset the kernel gives: for O_APPEND the kernel has
// already put it at the end of the file, so the mount never applies
// O_APPEND itself. The data goes to the write-back cache; quotas are
// checked now.
func (n *node) Write(ctx context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if n.fs.readonly {
		return 0, syscall.EROFS
	}
	wrote, errno := n.fs.wb.write(n.ino(), data, off)
	return uint32(wrote), errno
}

// Fsync is the durability barrier: it persists the inode's buffered
// writes and syncs the vault, so once it returns a crash loses nothing of
// the file (writeback.go). The fsync of a directory persists everything
// the mount buffers: after it, the vault as other processes read it (the
// CLI, a proxy's checkpoint and change summary) holds every write made
// through the mount.
func (n *node) Fsync(ctx context.Context, _ fs.FileHandle, flags uint32) syscall.Errno {
	if n.fs.readonly {
		return 0
	}
	if n.StableAttr().Mode == syscall.S_IFDIR {
		return n.fs.wb.fsyncAll()
	}
	return n.fs.wb.fsync(n.ino())
}

// maxCopyRange bounds one copy_file_range served here: the reply carries
// the count in 32 bits. A multiple of the chunk size, so that a long
// aligned copy stays aligned from one call to the next.
const maxCopyRange = 1 << 30

// CopyFileRange serves copy_file_range(2) between two files of the mount
// from the vault (vfs.Tx.CopyRange): at chunk-aligned offsets whole
// chunks are shared, not read and written back through the kernel, as cp
// does for a whole file. What either inode has buffered is persisted
// first; the kernel drops its cached pages of the written range itself.
func (n *node) CopyFileRange(ctx context.Context, _ fs.FileHandle, offIn uint64, out *fs.Inode, _ fs.FileHandle, offOut, length, flags uint64) (uint32, syscall.Errno) {
	if n.fs.readonly {
		return 0, syscall.EROFS
	}
	dst, ok := out.Operations().(*node)
	if !ok {
		return 0, syscall.EXDEV
	}
	if flags != 0 {
		return 0, syscall.EINVAL
	}
	for _, ino := range []vfs.Ino{n.ino(), dst.ino()} {
		if errno := n.fs.wb.flush(ino); errno != 0 {
			return 0, errno
		}
	}
	length = min(length, maxCopyRange)
	var src, old vfs.Attr
	if errno := n.fs.view("copy_file_range", func(tx *vfs.Tx) (err error) {
		if src, err = tx.GetAttr(n.ino()); err == nil {
			old, err = tx.GetAttr(dst.ino())
		}
		return err
	}); errno != 0 {
		return 0, errno
	}
	var growth int64
	if offIn < src.Size {
		if end := offOut + min(length, src.Size-offIn); end > old.Size {
			growth = int64(end - old.Size)
		}
	}
	var copied uint64
	defer n.fs.wb.changed()
	errno := n.fs.wb.reserveGrowth(growth, func() syscall.Errno {
		return n.fs.update("copy_file_range", func(tx *vfs.Tx) (err error) {
			copied, err = tx.CopyRange(n.ino(), offIn, dst.ino(), offOut, length)
			return err
		})
	})
	return uint32(copied), errno
}

// lseek(2) whences the kernel asks the file system about.
const (
	seekData = 3
	seekHole = 4
)

// Lseek answers SEEK_DATA and SEEK_HOLE from the vault's chunk maps
// (vfs.Tx.Seek), after persisting what the inode has buffered, so that
// sparse-aware tools (cp, tar) skip the holes.
func (n *node) Lseek(ctx context.Context, _ fs.FileHandle, off uint64, whence uint32) (uint64, syscall.Errno) {
	if whence != seekData && whence != seekHole {
		return 0, syscall.EINVAL
	}
	if errno := n.fs.wb.flush(n.ino()); errno != 0 {
		return 0, errno
	}
	var pos uint64
	errno := n.fs.view("lseek", func(tx *vfs.Tx) (err error) {
		pos, err = tx.Seek(n.ino(), off, whence == seekHole)
		return err
	})
	return pos, errno
}

// fallocate(2) modes.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// Allocate supports the modes the kernel passes on to a FUSE file system:
// the default (grow the file, the new range reading as zeros),
// FALLOC_FL_KEEP_SIZE alone (nothing to do: the vault allocates on
// write), FALLOC_FL_PUNCH_HOLE (always with KEEP_SIZE) and
// FALLOC_FL_ZERO_RANGE (vfs.Tx.ZeroRange: whole chunks become holes).
// The kernel drops its cached pages of the range itself.
func (n *node) Allocate(ctx context.Context, _ fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	zero := false
	switch mode {
	case 0:
	case fallocKeepSize:
		return 0
	case fallocPunchHole | fallocKeepSize, fallocZeroRange, fallocZeroRange | fallocKeepSize:
		zero = true
	default:
		return syscall.EOPNOTSUPP
	}
	if n.fs.readonly {
		return syscall.EROFS
	}
	if errno := n.fs.wb.flush(n.ino()); errno != 0 {
		return errno
	}
	end := off + size
	var a vfs.Attr
	if errno := n.fs.view("fallocate", func(tx *vfs.Tx) (err error) {
		a, err = tx.GetAttr(n.ino())
		return err
	}); errno != 0 {
		return errno
	}
	if a.Type != vfs.TypeFile {
		return syscall.ENODEV
	}
	keep := mode&fallocKeepSize != 0
	if !zero && end <= a.Size {
		return 0
	}
	var growth int64
	if !keep && end > a.Size {
		growth = int64(end - a.Size)
	}
	defer n.fs.wb.changed()
	return n.fs.wb.reserveGrowth(growth, func() syscall.Errno {
		return n.fs.update("fallocate", func(tx *vfs.Tx) error {
			if zero {
				return tx.ZeroRange(n.ino(), off, size, keep)
			}
			_, err := tx.SetAttr(n.ino(), vfs.SetAttr{Size: &end})
			return err
		})
	})
}
