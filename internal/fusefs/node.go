package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// fsys is what every node of one mount shares: the vault and how it is
// served.
type fsys struct {
	st       *store // every read and change of the vault (store.go)
	readonly bool
	// hostDir is a directory on the host disk beside the vault file: an
	// unlimited vault reports that disk's free space as its capacity.
	hostDir string
	// wb buffers file writes (writeback.go); nil on a read-only mount.
	wb *writeback
}

// node is one inode of the vault as the kernel sees it. Its FUSE inode
// number is the vault's inode number, so numbers are stable across
// remounts; go-fuse keeps one node per number, which makes hard links
// share a node.
type node struct {
	fs.Inode
	fs *fsys

	mu   sync.Mutex
	last *vfs.Attr // the attributes last reported to the kernel
	orphanState
}

// remember records the attributes reported for the node.
func (n *node) remember(a vfs.Attr) {
	n.mu.Lock()
	n.last = &a
	n.mu.Unlock()
}

// gone answers stat of a node whose inode the vault no longer holds but
// the kernel still does: a directory removed while a program is in it, or
// a symlink or special file unlinked while held (regular files are kept
// as orphans, orphan.go). It reports the last attributes with no links,
// as a local disk would.
func (n *node) gone() (vfs.Attr, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		return vfs.Attr{}, false
	}
	a := *n.last
	a.Nlink = 0
	return a, true
}

func (n *node) ino() vfs.Ino { return vfs.Ino(n.StableAttr().Ino) }

// toErrno is the one place where a model error becomes a FUSE reply. The
// model's errors are errno-shaped; anything that maps to EIO is unexpected
// and logged, so a failing vault leaves a trace in the mount's log.
func (f *fsys) toErrno(op string, err error) syscall.Errno {
	return f.st.errno(op, err)
}

// view runs fn in a read transaction.
func (f *fsys) view(op string, fn func(*vfs.Tx) error) syscall.Errno {
	return f.toErrno(op, f.st.view(fn))
}

// update runs fn as one change of the vault, in the store's open batch
// (store.go); file data goes through the write-back cache (writeback.go).
func (f *fsys) update(op string, fn func(*vfs.Tx) error) syscall.Errno {
	if f.readonly {
		return syscall.EROFS
	}
	return f.toErrno(op, f.st.update(fn))
}

// typeBitsOf maps each vault file type to its S_IF* bits.
var typeBitsOf = map[vfs.FileType]uint32{
	vfs.TypeDir:     syscall.S_IFDIR,
	vfs.TypeFile:    syscall.S_IFREG,
	vfs.TypeSymlink: syscall.S_IFLNK,
	vfs.TypeFifo:    syscall.S_IFIFO,
	vfs.TypeSocket:  syscall.S_IFSOCK,
	vfs.TypeChar:    syscall.S_IFCHR,
	vfs.TypeBlock:   syscall.S_IFBLK,
}

// typeBits is the S_IF* bits of a vault file type; 0 when unknown.
func typeBits(t vfs.FileType) uint32 { return typeBitsOf[t] }

// fileType is the vault file type of S_IF* mode bits; 0 when unknown.
func fileType(mode uint32) vfs.FileType {
	for t, bits := range typeBitsOf {
		if bits == mode&syscall.S_IFMT {
			return t
		}
	}
	return 0
}

// blockSize is the I/O size stat reports: one chunk, so tools that copy
// in st_blksize units write whole chunks.
const blockSize = vfs.ChunkSize

func fillAttr(a vfs.Attr, out *fuse.Attr) {
	out.Ino = uint64(a.Ino)
	out.Size = a.Size
	out.Blocks = (a.Size + 511) / 512
	out.Mode = typeBits(a.Type) | a.Mode&0o7777
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Blksize = blockSize
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

// child returns the node for a, creating it if the kernel does not know
// it yet, and fills the entry reply.
//
// a must already show a dirty inode's buffered size (writeback.attrs):
// only new inodes, which have none, come here straight from the vault.
func (n *node) child(ctx context.Context, a vfs.Attr, out *fuse.EntryOut) *fs.Inode {
	fillAttr(a, &out.Attr)
	in := n.NewInode(ctx, &node{fs: n.fs}, fs.StableAttr{Mode: typeBits(a.Type), Ino: uint64(a.Ino)})
	if c, ok := in.Operations().(*node); ok {
		c.remember(a)
	}
	return in
}

// caller is the uid and gid of the process behind a request.
func caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, errno := n.fs.wb.attrs(func() (a vfs.Attr, errno syscall.Errno) {
		errno = n.fs.view("lookup", func(tx *vfs.Tx) (err error) {
			a, err = tx.Lookup(n.ino(), name)
			return err
		})
		return a, errno
	})
	if errno != 0 {
		return nil, errno
	}
	return n.child(ctx, a, out), 0
}

func (n *node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, errno := n.fs.wb.attrs(func() (a vfs.Attr, errno syscall.Errno) {
		errno = n.fs.view("getattr", func(tx *vfs.Tx) (err error) {
			a, err = tx.GetAttr(n.ino())
			return err
		})
		return a, errno
	})
	if errno == syscall.ENOENT {
		if g, ok := n.gone(); ok {
			a, errno = g, 0
		}
	}
	if errno == 0 {
		n.remember(a)
		fillAttr(a, &out.Attr)
	}
	return errno
}

func (n *node) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var s vfs.SetAttr
	if m, ok := in.GetMode(); ok {
		s.Mode = &m
	}
	if uid, ok := in.GetUID(); ok {
		s.Uid = &uid
	}
	if gid, ok := in.GetGID(); ok {
		s.Gid = &gid
	}
	if size, ok := in.GetSize(); ok {
		s.Size = &size
	}
	if t, ok := in.GetATime(); ok {
		s.Atime = &t
	}
	if t, ok := in.GetMTime(); ok {
		s.Mtime = &t
	}
	if n.fs.readonly {
		return syscall.EROFS
	}
	if s.Size == nil {
		// Mode, owner and times go straight to the vault; a buffered
		// file keeps them (its batch writes the mtime set here).
		var a vfs.Attr
		var errno syscall.Errno
		n.fs.wb.withRecord(n.ino(), func(f *wfile) {
			errno = n.fs.update("setattr", func(tx *vfs.Tx) (err error) {
				a, err = tx.SetAttr(n.ino(), s)
				return err
			})
			if errno == 0 && f != nil {
				if s.Mtime != nil {
					f.mtime = *s.Mtime
				}
				f.show(&a)
			}
		})
		if errno == 0 {
			n.remember(a)
			fillAttr(a, &out.Attr)
		}
		return errno
	}
	// The vault must hold the file before its size changes.
	if errno := n.fs.wb.flush(n.ino()); errno != 0 {
		return errno
	}
	var growth int64
	errno := n.fs.view("setattr", func(tx *vfs.Tx) error {
		cur, err := tx.GetAttr(n.ino())
		growth = int64(*s.Size) - int64(cur.Size)
		return err
	})
	if errno != 0 {
		return errno
	}
	var a vfs.Attr
	errno = n.fs.wb.reserveGrowth(growth, func() syscall.Errno {
		return n.fs.update("setattr", func(tx *vfs.Tx) (err error) {
			a, err = tx.SetAttr(n.ino(), s)
			return err
		})
	})
	n.fs.wb.changed()
	if errno == 0 {
		n.remember(a)
		fillAttr(a, &out.Attr)
	}
	return errno
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	var ents []vfs.DirEntry
	errno := n.fs.view("readdir", func(tx *vfs.Tx) (err error) {
		ents, err = tx.ReadDir(n.ino())
		return err
	})
	if errno != 0 {
		return nil, errno
	}
	// "." and "..", as every Linux disk lists them (ls -a, find).
	parent := n.ino()
	if _, p := n.Parent(); p != nil {
		parent = vfs.Ino(p.StableAttr().Ino)
	}
	out := make([]fuse.DirEntry, 0, len(ents)+2)
	out = append(out,
		fuse.DirEntry{Name: ".", Ino: uint64(n.ino()), Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Ino: uint64(parent), Mode: syscall.S_IFDIR})
	for _, e := range ents {
		out = append(out, fuse.DirEntry{Name: e.Name, Ino: uint64(e.Ino), Mode: typeBits(e.Type)})
	}
	return fs.NewListDirStream(out), 0
}

// OpendirHandle opens a listing for listingFS (dirlist.go), which asks for
// one per READDIR: the kernel itself no longer opens directories, and
// keeps their listings (the flags say so for a kernel that does open
// them). The mount is the vault's only writer, and the kernel drops a
// listing itself whenever it changes that directory, so git status and
// grep -r list each directory once rather than on every walk.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// dirHandle is an open directory: its listing, read at the first
// READDIR.
type dirHandle struct {
	n  *node
	ds fs.DirStream
}

func (d *dirHandle) stream(ctx context.Context) syscall.Errno {
	if d.ds != nil {
		return 0
	}
	var errno syscall.Errno
	d.ds, errno = d.n.Readdir(ctx)
	return errno
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if errno := d.stream(ctx); errno != 0 {
		return nil, errno
	}
	if !d.ds.HasNext() {
		return nil, 0
	}
	e, errno := d.ds.Next()
	return &e, errno
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if errno := d.stream(ctx); errno != 0 {
		return errno
	}
	if sd, ok := d.ds.(fs.FileSeekdirer); ok {
		return sd.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if d.ds != nil {
		d.ds.Close()
	}
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	var target string
	errno := n.fs.view("readlink", func(tx *vfs.Tx) (err error) {
		target, err = tx.Readlink(n.ino())
		return err
	})
	return []byte(target), errno
}

// Statfs reports the quota as the capacity; an unlimited vault reports
// the free space of the disk that holds it.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var u vfs.Usage
	var q vfs.Quota
	errno := n.fs.view("statfs", func(tx *vfs.Tx) (err error) {
		if u, err = tx.Usage(); err != nil {
			return err
		}
		q, err = tx.Quota()
		return err
	})
	if errno != 0 {
		return errno
	}
	const bsize = 4096
	out.Bsize, out.Frsize, out.NameLen = bsize, bsize, vfs.NameMax
	used := (uint64(max(u.Bytes+n.fs.wb.pending(), 0)) + bsize - 1) / bsize
	var host syscall.Statfs_t
	hostOK := n.fs.hostDir != "" && syscall.Statfs(n.fs.hostDir, &host) == nil
	if q.MaxSizeMB > 0 {
		out.Blocks = uint64(q.MaxSizeMB) << 20 / bsize
		out.Bfree = out.Blocks - min(used, out.Blocks)
	} else if hostOK {
		out.Bfree = host.Bavail * uint64(host.Bsize) / bsize
		out.Blocks = out.Bfree + used
	} else {
		out.Blocks, out.Bfree = 1<<40, 1<<40-used
	}
	out.Bavail = out.Bfree
	files := uint64(max(u.Files, 0))
	if q.MaxFiles > 0 {
		out.Files = uint64(q.MaxFiles)
		out.Ffree = out.Files - min(files, out.Files)
	} else {
		out.Files, out.Ffree = 1<<32, 1<<32-files
	}
	return 0
}

// timeouts: the mount is its vault's only writer, so what the kernel
// caches stays true until the mount itself changes it.
const cacheTimeout = time.Hour
