//go:build linux

package overlay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Materialize writes the whole state tx reads into dir (an empty
// directory) as one squashed overlay layer: every file with its mode,
// owner, times and xattrs, symlinks, devices and FIFOs as they are, and
// the names of one hard-linked inode linked to one host file. A squashed
// layer is the bottom of a stack, so it holds no whiteouts. The vault's
// own overlay.* xattrs are not written: the kernel would take them for
// its markers.
func Materialize(ctx context.Context, tx *vfs.Tx, dir string) (MatStats, error) {
	return materialize(ctx, tx, dir, nil)
}

// materialize is Materialize; with a store, a regular file's data goes
// there once and the tree holds a stub that redirects to it (Shared).
func materialize(ctx context.Context, tx *vfs.Tx, dir string, store *storeWriter) (MatStats, error) {
	m := &materializer{ctx: ctx, tx: tx, links: map[vfs.Ino]string{}, buf: make([]byte, 1<<20), store: store,
		progress: ProgressOf(ctx), last: time.Now()}
	root, err := tx.GetAttr(vfs.RootIno)
	if err != nil {
		return m.st, err
	}
	if m.progress != nil {
		u, err := tx.Usage()
		if err != nil {
			return m.st, err
		}
		m.total = int(u.Files) // inodes: hard links make the names a few more
		defer func() { m.progress(m.st.Files, m.st.Files) }()
	}
	if err := m.dir(&vfs.DirWalk{}, root, dir); err != nil {
		return m.st, err
	}
	return m.st, nil
}

type materializer struct {
	ctx   context.Context
	tx    *vfs.Tx
	links map[vfs.Ino]string // host path of the first name of each linked inode
	buf   []byte
	st    MatStats
	store *storeWriter // nil: whole files in the tree
	// progress hears of the names written every progressEvery, of about
	// total (nil: nobody asked).
	progress Progress
	total    int
	last     time.Time
}

func (m *materializer) dir(w *vfs.DirWalk, at vfs.Attr, path string) error {
	if err := w.Enter(at.Ino); err != nil {
		return err
	}
	if err := m.ctx.Err(); err != nil {
		return errs.Stopped(m.ctx, "materialize")
	}
	ents, err := m.tx.ReadDir(at.Ino)
	if err != nil {
		return err
	}
	for _, e := range ents {
		cat, err := m.tx.GetAttr(e.Ino)
		if err != nil {
			return err
		}
		p := filepath.Join(path, e.Name)
		if err := m.node(w, cat, p); err != nil {
			return err
		}
	}
	// A directory's times are set once its entries are in: writing them
	// changed its mtime.
	return m.meta(at, path)
}

func (m *materializer) node(w *vfs.DirWalk, at vfs.Attr, p string) error {
	m.st.Files++
	if m.progress != nil && m.st.Files%256 == 0 {
		if now := time.Now(); now.Sub(m.last) >= progressEvery {
			m.last = now
			m.progress(m.st.Files, m.total)
		}
	}
	if at.Type != vfs.TypeDir && at.Nlink > 1 {
		if first, ok := m.links[at.Ino]; ok {
			return hostErr("materialize", p, os.Link(first, p))
		}
		m.links[at.Ino] = p
	}
	var err error
	switch at.Type {
	case vfs.TypeDir:
		if err = os.Mkdir(p, 0o700); err == nil {
			return m.dir(w, at, p)
		}
	case vfs.TypeFile:
		err = m.file(at, p)
	case vfs.TypeSymlink:
		var target string
		if target, err = m.tx.Readlink(at.Ino); err == nil {
			err = os.Symlink(target, p)
		}
	case vfs.TypeFifo:
		err = unix.Mkfifo(p, 0o600)
	case vfs.TypeChar:
		err = unix.Mknod(p, unix.S_IFCHR|0o600, int(at.Rdev))
	case vfs.TypeBlock:
		err = unix.Mknod(p, unix.S_IFBLK|0o600, int(at.Rdev))
	case vfs.TypeSocket:
		err = unix.Mknod(p, unix.S_IFSOCK|0o600, 0)
	default:
		err = fmt.Errorf("unknown file type %d", at.Type)
	}
	if err != nil {
		return hostErr("materialize", p, err)
	}
	return m.meta(at, p)
}

func (m *materializer) file(at vfs.Attr, p string) error {
	if m.store == nil || at.Size == 0 {
		return m.data(at, p)
	}
	key, err := m.tx.ContentKey(at.Ino)
	if err != nil {
		return err
	}
	name, write, found, collide := m.store.find(key)
	if collide { // another file's data has this name: a whole copy here
		return m.data(at, p)
	}
	if found {
		m.st.Reused += int64(at.Size)
	} else {
		before := m.st.Bytes
		if err := m.data(at, write); err != nil {
			return err
		}
		m.st.Stored += m.st.Bytes - before
		if err := unix.Lsetxattr(write, storeKeyAttr, key[:], 0); err != nil {
			return err
		}
	}
	m.store.add(name, key, int64(at.Size), !found)
	return m.stub(p, int64(at.Size), name)
}

// stub writes the metadata-only file that reads its data from the store's
// name: sparse, of the file's size, with the overlay's metacopy marker
// and an absolute redirect into the data-only layer.
func (m *materializer) stub(p string, size int64, name string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Lsetxattr(p, string(Trusted)+".overlay.metacopy", nil, 0)
	}
	if err == nil {
		err = unix.Lsetxattr(p, string(Trusted)+".overlay.redirect", []byte("/"+name), 0)
	}
	return err
}

// data writes the file's whole content to p.
func (m *materializer) data(at vfs.Attr, p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	for off := int64(0); off < int64(at.Size); {
		n, err := m.tx.Read(at.Ino, off, m.buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if _, err := f.WriteAt(m.buf[:n], off); err != nil {
			return err
		}
		off += int64(n)
		m.st.Bytes += int64(n)
	}
	if err := f.Truncate(int64(at.Size)); err != nil {
		return err
	}
	return f.Close()
}

// meta sets what a name carries besides its content: xattrs, owner,
// mode and times, in that order (a chown clears set-id bits; times last).
func (m *materializer) meta(at vfs.Attr, p string) error {
	names, err := m.tx.ListXattr(at.Ino)
	if err != nil {
		return err
	}
	for _, n := range names {
		if isOverlayXattr(n) {
			continue
		}
		val, err := m.tx.GetXattr(at.Ino, n)
		if err != nil {
			return err
		}
		if err := unix.Lsetxattr(p, n, val, 0); err != nil {
			return hostErr("materialize", p, fmt.Errorf("xattr %s: %w", n, err))
		}
	}
	// Only root gives a host file another owner. Another user's cache
	// is its own files, which is also what the uid map of its user
	// namespace can show (a copy-up of an unmapped owner's file fails
	// with EOVERFLOW); Ingest keeps the vault's owners for it.
	if os.Geteuid() == 0 {
		if err := os.Lchown(p, int(at.Uid), int(at.Gid)); err != nil {
			return hostErr("materialize", p, err)
		}
	}
	if at.Type != vfs.TypeSymlink {
		if err := unix.Fchmodat(unix.AT_FDCWD, p, at.Mode&0o7777, 0); err != nil {
			return hostErr("materialize", p, err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(at.Atime.UnixNano()), unix.NsecToTimespec(at.Mtime.UnixNano())}
	return hostErr("materialize", p, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
}

// isOverlayXattr reports an xattr the overlay reads as its own marker, in
// either namespace: never materialized, never ingested.
func isOverlayXattr(name string) bool {
	return strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.overlay.")
}

func hostErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*errs.Error); ok {
		return err
	}
	return &errs.Error{Kind: errs.IoError, Op: op, Path: path, Err: err}
}

// since is a small helper for the reported costs.
func since(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
