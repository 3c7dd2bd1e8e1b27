//go:build linux

package overlay

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Ingest turns the upper dir of an overlay mounted over the state tx
// writes into changes of that state: a whiteout (a c 0 0 device, or an
// empty file carrying overlay.whiteout) deletes its name, an opaque dir
// replaces the directory below it, a file is written chunk by chunk so
// that only chunks that changed are stored (the vault hashes the others
// and keeps their records), attributes and xattrs are set from the upper
// (overlay.* markers dropped), and names the upper holds as one hard
// linked file become one vault inode. Quotas are charged as any write
// charges them: over a limit the whole transaction fails with
// QuotaExceeded and the caller's state is as it was. The caller runs it
// in one write transaction (vault.UpdateSealed); it must not be applied
// twice on a state that changed since, but is idempotent otherwise.
func Ingest(tx *vfs.Tx, upper string, f Format) (IngestStats, error) {
	in := &ingester{tx: tx, f: f, links: map[[2]uint64]vfs.Ino{}, buf: make([]byte, 16*vfs.ChunkSize),
		unprivileged: os.Geteuid() != 0}
	err := in.dir(upper, vfs.RootIno, 0, false)
	return in.st, err
}

// sig is a name's stat data in the upper as an ingest saw it (git's
// index stat data): the same again, and not racy (its ctime was not
// within the racy window of that ingest's start, so a write in the same
// clock tick cannot hide), means the state holds the name as the upper does.
type sig struct {
	ino, size    uint64
	mode, nlink  uint32
	uid, gid     uint32
	mtime, ctime int64
	racy         bool
	opaque       bool // a dir's overlay.opaque marker
}

func (g sig) isDir() bool { return g.mode&unix.S_IFMT == unix.S_IFDIR }

// IngestOnto is Ingest into a state that an earlier IngestOnto of the
// same upper wrote, which met the names in seen: a name other than a
// directory whose stat data is what it was then is left as the state
// holds it (its content, attributes and xattrs all move its ctime), so an
// ingest costs a stat of each name and the work of those that changed.
// It returns the stat data of every name it met, by vault path, for the
// next one. The names of one host inode share their stat data, so they
// are all taken in or all left.
func IngestOnto(tx *vfs.Tx, upper string, f Format, seen map[string]sig) (IngestStats, map[string]sig, error) {
	in := &ingester{tx: tx, f: f, links: map[[2]uint64]vfs.Ino{}, buf: make([]byte, 16*vfs.ChunkSize),
		unprivileged: os.Geteuid() != 0, upper: upper, seen: seen, met: map[string]sig{}, start: time.Now()}
	err := in.dir(upper, vfs.RootIno, 0, false)
	return in.st, in.met, err
}

type ingester struct {
	tx    *vfs.Tx
	f     Format
	links map[[2]uint64]vfs.Ino // host dev,ino → the vault inode its first name became
	buf   []byte
	st    IngestStats
	// unprivileged: the upper is this user's own files (a user namespace
	// run), so its owners say nothing (the vault's are kept, and new
	// names are the user's) and a name its mode closes to its owner is
	// opened for the read (accessible).
	unprivileged bool
	// upper, seen, met and start are IngestOnto's: names met and left
	// alone when their stat data is as seen.
	upper     string
	seen, met map[string]sig
	start     time.Time
}

// dir takes in the upper's dir path as vault dir ino. fresh: ino was
// made by this ingest (or emptied), so none of the names is in the vault
// yet and none needs looking up.
func (in *ingester) dir(path string, ino vfs.Ino, depth int, fresh bool) error {
	if depth > vfs.MaxDepth {
		return &errs.Error{Kind: errs.InvalidInput, Op: "ingest", Path: path, Err: errors.New("upper dir too deep")}
	}
	in.st.Dirs++
	ents, err := os.ReadDir(path)
	if err != nil {
		return hostErr("ingest", path, err)
	}
	// Deletions first, so that a name a whiteout frees is free for what
	// the upper puts beside it.
	slices.SortStableFunc(ents, func(a, b os.DirEntry) int {
		wa, wb := a.Type()&os.ModeCharDevice != 0, b.Type()&os.ModeCharDevice != 0
		switch {
		case wa && !wb:
			return -1
		case wb && !wa:
			return 1
		}
		return 0
	})
	for _, e := range ents {
		if err := in.entry(filepath.Join(path, e.Name()), ino, e.Name(), depth, fresh); err != nil {
			return err
		}
	}
	return nil
}

func (in *ingester) entry(p string, dir vfs.Ino, name string, depth int, fresh bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return hostErr("ingest", p, err)
	}
	typ := st.Mode & unix.S_IFMT
	// One listing of p's xattrs tells its overlay markers and the xattrs
	// the vault keeps (a getxattr a marker cost 2 µs a name, a fifth of an
	// ingest of new files). A dir's is listed first (its sig says whether
	// it is opaque), another name's only once IngestOnto did not skip it.
	var xs []string
	list := func() (err error) {
		xs, err = listXattrs(p)
		return hostErr("ingest", p, err)
	}
	if typ == unix.S_IFDIR {
		if err := list(); err != nil {
			return err
		}
	}
	var rel string
	opaque := typ == unix.S_IFDIR && in.has(xs, "opaque") && in.marker(p, "opaque") == "y"
	if in.met != nil {
		rel = "/" + filepath.ToSlash(p[len(in.upper)+1:])
		g := sig{ino: st.Ino, size: uint64(st.Size), mode: st.Mode, nlink: uint32(st.Nlink), uid: st.Uid, gid: st.Gid,
			mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), opaque: opaque}
		g.racy = racy(st.Ctim, in.start)
		in.met[rel] = g
		// Not below a dir this ingest made or emptied (fresh): the state
		// holds nothing there, whatever an earlier ingest wrote.
		if old, ok := in.seen[rel]; ok && !fresh && typ != unix.S_IFDIR && !old.racy && old == g {
			return nil // the state holds it as the upper does (IngestOnto)
		}
	}
	if typ != unix.S_IFDIR {
		if err := list(); err != nil {
			return err
		}
	}
	var cur vfs.Attr
	var err error
	exists := false
	if !fresh {
		cur, err = in.tx.Lookup(dir, name)
		exists = err == nil
		if err != nil && !errs.Is(err, errs.NotFound) {
			return err
		}
	}
	if in.isWhiteout(&st, xs) {
		if exists {
			n, err := in.tx.RemoveAll(dir, name)
			in.st.Deleted += n
			return err
		}
		return nil
	}
	if typ == unix.S_IFDIR {
		made := !exists
		// An opaque dir an earlier IngestOnto of this upper met as this
		// same opaque dir holds only what that ingest wrote there: the
		// lower's names are gone already, and emptying it again would
		// write all of it again.
		old, again := in.seen[rel]
		again = again && !fresh && old.opaque && old.ino == st.Ino
		switch {
		case exists && cur.Type == vfs.TypeDir && opaque && !again:
			if err := in.empty(cur.Ino); err != nil {
				return err
			}
			made = true
		case exists && cur.Type != vfs.TypeDir:
			if err := in.remove(dir, name, cur); err != nil {
				return err
			}
			exists, made = false, true
		}
		if !exists {
			if cur, err = in.tx.Mkdir(dir, name, st.Mode&0o7777, st.Uid, st.Gid); err != nil {
				return err
			}
		}
		err := in.accessible(p, &st, 0o700, func() error { return in.dir(p, cur.Ino, depth+1, made) })
		if err != nil {
			return err
		}
		return in.meta(p, cur.Ino, &st, !exists, xs)
	}
	key := [2]uint64{uint64(st.Dev), st.Ino}
	if st.Nlink > 1 {
		if first, ok := in.links[key]; ok {
			if exists {
				if cur.Ino == first {
					return nil
				}
				if err := in.remove(dir, name, cur); err != nil {
					return err
				}
			}
			_, err := in.tx.Link(first, dir, name)
			return err
		}
	}
	if typ == unix.S_IFREG && in.has(xs, "metacopy") {
		ino, err := in.metacopy(p, dir, name, cur, exists, &st, xs)
		if err != nil {
			return err
		}
		if st.Nlink > 1 {
			in.links[key] = ino
		}
		return in.meta(p, ino, &st, false, xs)
	}
	// A vault inode with other names keeps their content: overlayfs
	// broke the link at copy-up, so this name becomes a file of its own.
	if exists && (vfsType(typ) != cur.Type || cur.Nlink > 1 || typ != unix.S_IFREG) {
		if !(typ == unix.S_IFLNK && cur.Type == vfs.TypeSymlink && cur.Nlink == 1 && in.sameTarget(p, cur.Ino)) {
			if err := in.remove(dir, name, cur); err != nil {
				return err
			}
			exists = false
		}
	}
	if !exists {
		// Made with the host's times, so that meta finds them set.
		nn := vfs.NewNode{Type: vfsType(typ), Mode: st.Mode & 0o7777, Uid: st.Uid, Gid: st.Gid, Rdev: uint32(st.Rdev),
			Atime: time.Unix(st.Atim.Unix()), Mtime: time.Unix(st.Mtim.Unix())}
		if typ == unix.S_IFLNK {
			if nn.Target, err = os.Readlink(p); err != nil {
				return hostErr("ingest", p, err)
			}
		}
		if cur, err = in.tx.Mknod(dir, name, nn); err != nil {
			return err
		}
	}
	if typ == unix.S_IFREG {
		if err := in.accessible(p, &st, 0o400, func() error { return in.content(p, cur, &st) }); err != nil {
			return err
		}
	}
	if st.Nlink > 1 {
		in.links[key] = cur.Ino
	}
	return in.meta(p, cur.Ino, &st, !exists, xs)
}

// accessible runs fn with p's mode opened to its owner by need (bits),
// then restores the mode: a user without CAP_DAC_OVERRIDE cannot read its
// own file of mode 0000, and the upper may become a cache entry, so it
// keeps the modes the run gave it.
func (in *ingester) accessible(p string, st *unix.Stat_t, need uint32, fn func() error) error {
	mode := st.Mode & 0o7777
	if !in.unprivileged || mode&need == need || int(st.Uid) != os.Geteuid() {
		return fn()
	}
	if err := unix.Chmod(p, mode|need); err != nil {
		return hostErr("ingest", p, err)
	}
	err := fn()
	return errors.Join(err, hostErr("ingest", p, unix.Chmod(p, mode)))
}

// metacopy takes in a metadata-only copy-up, which an upper mounted with
// metacopy=on holds after a chmod, chown, utimes or setxattr: a sparse
// file whose data is still the lower's. It changes attributes only, so
// the name keeps the content it has in the state below (a name whose
// vault inode has other names gets an inode of its own holding the same
// chunks, as a copy-up breaks the link). One with a redirect (renamed
// while metadata-only) or with nothing below is refused: its data is not
// at its name.
func (in *ingester) metacopy(p string, dir vfs.Ino, name string, cur vfs.Attr, exists bool, st *unix.Stat_t, xs []string) (vfs.Ino, error) {
	if in.has(xs, "redirect") || !exists || cur.Type != vfs.TypeFile {
		return 0, &errs.Error{Kind: errs.InvalidInput, Op: "ingest", Path: p,
			Err:  errors.New("a metadata-only copy-up whose data is not at its name in the state below"),
			Hint: "mount the overlay with redirect_dir=off (Mount does)"}
	}
	if cur.Nlink == 1 {
		return cur.Ino, nil
	}
	if err := in.tx.Unlink(dir, name); err != nil {
		return 0, err
	}
	n, err := in.tx.Mknod(dir, name, vfs.NewNode{Type: vfs.TypeFile, Mode: st.Mode & 0o7777, Uid: st.Uid, Gid: st.Gid})
	if err != nil {
		return 0, err
	}
	return n.Ino, in.tx.CopyData(cur.Ino, n.Ino)
}

// remove takes away dir/name, a directory with everything below it.
func (in *ingester) remove(dir vfs.Ino, name string, cur vfs.Attr) error {
	n, err := in.tx.RemoveAll(dir, name)
	in.st.Deleted += n
	return err
}

// empty removes every entry of directory ino: an opaque dir hides all the
// lower layers held there.
func (in *ingester) empty(ino vfs.Ino) error {
	ents, err := in.tx.ReadDir(ino)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n, err := in.tx.RemoveAll(ino, e.Name)
		in.st.Deleted += n
		if err != nil {
			return err
		}
	}
	return nil
}

// content makes file ino hold what the host file p holds, in steps of
// whole chunks: WriteChunks stores a chunk only when its hash is not what
// the file holds there already.
// cur is the file's attributes as the vault holds them.
func (in *ingester) content(p string, cur vfs.Attr, st *unix.Stat_t) error {
	if st.Size == 0 && cur.Size == 0 {
		in.st.Written++ // nothing to read, nothing to cut
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return hostErr("ingest", p, err)
	}
	defer f.Close()
	size, ino := uint64(st.Size), cur.Ino
	if cur.Size > size {
		if _, err := in.tx.SetAttr(ino, vfs.SetAttr{Size: &size}); err != nil {
			return err
		}
	}
	in.st.Written++
	in.st.Bytes += st.Size
	mtime := time.Unix(st.Mtim.Unix())
	for off := uint64(0); off < size; {
		n, err := io.ReadFull(f, in.buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return hostErr("ingest", p, err)
		}
		if n == 0 {
			break
		}
		var chunks []vfs.Chunk
		for i := 0; i < n; i += vfs.ChunkSize {
			chunks = append(chunks, vfs.Chunk{Index: (off + uint64(i)) / vfs.ChunkSize, Data: in.buf[i:min(n, i+vfs.ChunkSize)]})
		}
		end := min(off+uint64(n), size)
		if err := in.tx.WriteChunks(ino, end, mtime, time.Time{}, chunks); err != nil {
			return err
		}
		off += uint64(n)
	}
	if cur.Size < size { // a file that grew by a hole
		if _, err := in.tx.SetAttr(ino, vfs.SetAttr{Size: &size}); err != nil {
			return err
		}
	}
	return nil
}

// meta sets mode, owner, times and xattrs of ino from the host's p,
// whose xattrs are named xs. made: ino was made by this ingest, so it has
// no xattrs yet.
func (in *ingester) meta(p string, ino vfs.Ino, st *unix.Stat_t, made bool, xs []string) error {
	cur, err := in.tx.GetAttr(ino)
	if err != nil {
		return err
	}
	var s vfs.SetAttr
	if mode := st.Mode & 0o7777; mode != cur.Mode && cur.Type != vfs.TypeSymlink {
		s.Mode = &mode
	}
	if st.Uid != cur.Uid && !in.unprivileged {
		s.Uid = &st.Uid
	}
	if st.Gid != cur.Gid && !in.unprivileged {
		s.Gid = &st.Gid
	}
	at, mt := time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix())
	if !at.Equal(cur.Atime) {
		s.Atime = &at
	}
	if !mt.Equal(cur.Mtime) {
		s.Mtime = &mt
	}
	if s != (vfs.SetAttr{}) {
		if _, err := in.tx.SetAttr(ino, s); err != nil {
			return err
		}
	}
	return in.xattrs(p, ino, made, xs)
}

// xattrs makes ino's xattrs those of p (named xs), without the overlay's
// markers.
func (in *ingester) xattrs(p string, ino vfs.Ino, made bool, xs []string) error {
	want := map[string][]byte{}
	for _, n := range xs {
		if isOverlayXattr(n) {
			continue
		}
		v, err := getXattr(p, n)
		if err != nil {
			return hostErr("ingest", p, err)
		}
		want[n] = v
	}
	if made {
		for n, v := range want {
			if err := in.tx.SetXattr(ino, n, v, 0); err != nil {
				return err
			}
		}
		return nil
	}
	have, err := in.tx.ListXattr(ino)
	if err != nil {
		return err
	}
	for _, n := range have {
		if _, ok := want[n]; !ok {
			if err := in.tx.RemoveXattr(ino, n); err != nil {
				return err
			}
		}
	}
	for n, v := range want {
		old, err := in.tx.GetXattr(ino, n)
		if err == nil && bytes.Equal(old, v) {
			continue
		}
		if err := in.tx.SetXattr(ino, n, v, 0); err != nil {
			return err
		}
	}
	return nil
}

// isWhiteout tells whether a name of stat data st and xattrs xs is a
// whiteout: a c 0 0 device, or an empty file marked overlay.whiteout.
func (in *ingester) isWhiteout(st *unix.Stat_t, xs []string) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return st.Rdev == 0
	case unix.S_IFREG:
		return st.Size == 0 && in.has(xs, "whiteout")
	}
	return false
}

// has reports whether the xattr names xs hold the overlay marker name.
func (in *ingester) has(xs []string, name string) bool {
	return slices.Contains(xs, in.f.prefix()+name)
}

// marker is the value of the overlay marker xattr name on p, or "".
func (in *ingester) marker(p, name string) string {
	v, err := getXattr(p, in.f.prefix()+name)
	if err != nil {
		return ""
	}
	return string(v)
}

func (in *ingester) sameTarget(p string, ino vfs.Ino) bool {
	a, err1 := os.Readlink(p)
	b, err2 := in.tx.Readlink(ino)
	return err1 == nil && err2 == nil && a == b
}

func vfsType(m uint32) vfs.FileType {
	switch m {
	case unix.S_IFDIR:
		return vfs.TypeDir
	case unix.S_IFREG:
		return vfs.TypeFile
	case unix.S_IFLNK:
		return vfs.TypeSymlink
	case unix.S_IFIFO:
		return vfs.TypeFifo
	case unix.S_IFSOCK:
		return vfs.TypeSocket
	case unix.S_IFCHR:
		return vfs.TypeChar
	case unix.S_IFBLK:
		return vfs.TypeBlock
	}
	return 0
}

func listXattrs(p string) ([]string, error) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var out []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				out = append(out, string(b))
			}
		}
		return out, nil
	}
}

func getXattr(p, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*16)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}
