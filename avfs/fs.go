package avfs

import (
	"context"
	"io"
	"io/fs"
	"slices"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// FS is a state of a vault as an io/fs file system: names are unrooted
// slash paths ("src/main.go", "." for the root), errors are *fs.PathError
// wrapping an *Error (errors.Is(err, fs.ErrNotExist) holds for a missing
// file), and symlinks are followed by Open, Stat and ReadFile, not by
// Lstat and ReadLink.
//
// An FS of a checkpoint reads one frozen state: what it returns never
// changes while the checkpoint exists. An FS of the working state (or of
// the state just after a checkpoint, which later writes may still change)
// reads it live: each call is one transaction, and a file or a directory
// opened is read whole in the transaction of its Open, so one file never
// mixes two versions. To read a tree that others are writing as one
// snapshot, save a checkpoint and use FSAt with its name.
type FS struct {
	st     vfs.StateRef
	ref    string // the canonical REF of the state
	frozen bool   // a checkpoint: nothing changes it
	res    *refs.Resolver
}

var (
	_ fs.ReadFileFS = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
	_ fs.ReadLinkFS = (*FS)(nil)
)

// FS is the vault's working state as an io/fs file system (see FS).
func (v *Vault) FS() *FS {
	return &FS{st: vfs.StateRef{Vault: v.v}, ref: "vault:" + v.Name()}
}

// FSAt is the state REF names as an io/fs file system. A REF is "@" (the
// working state), a checkpoint of this vault, vault:NAME or
// vault:NAME@CHECKPOINT (any vault of the home), run:ID (the state just
// before proxy run ID) or run:ID^after (just after it). A malformed REF is
// InvalidInput; one that names nothing is VaultNotFound,
// CheckpointNotFound or NotFound. Close the FS when done: it holds the
// vaults a REF of another vault opened.
func (v *Vault) FSAt(ctx context.Context, ref string) (*FS, error) {
	if err := stopped(ctx, "fs"); err != nil {
		return nil, err
	}
	res := v.resolver()
	st, err := res.Resolve(ref)
	if err != nil {
		_ = res.Close()
		return nil, wrapErr(err)
	}
	return &FS{st: st.StateRef, ref: st.Name, frozen: st.Checkpoint != "" && !st.After, res: res}, nil
}

// resolver resolves REFs with this vault as the selected one.
func (v *Vault) resolver() *refs.Resolver {
	res := refs.NewResolver(v.home.reg, func() (string, error) { return v.Name(), nil })
	res.Use(v.v)
	return res
}

// Ref is the canonical REF of the state: vault:NAME, or
// vault:NAME@CHECKPOINT (with ^after for a run's after state).
func (f *FS) Ref() string { return f.ref }

// Close releases the vaults FSAt opened for the REF. The FS of the
// vault's own states needs no Close; closing it is harmless.
func (f *FS) Close() error {
	if f.res == nil {
		return nil
	}
	return wrapErr(f.res.Close())
}

func (f *FS) pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: wrapErr(err)}
}

// vaultPath maps an io/fs name to the vault's absolute path.
func vaultPath(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return "/", nil
	}
	return "/" + name, nil
}

// Open opens the file or directory name, following symlinks. The file
// implements io.ReaderAt and io.Seeker; a directory, fs.ReadDirFile.
func (f *FS) Open(name string) (fs.File, error) {
	p, err := vaultPath("open", name)
	if err != nil {
		return nil, err
	}
	var out fs.File
	err = f.st.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, true)
		if err != nil {
			return err
		}
		info, err := fileInfo(tx, baseName(name), a)
		if err != nil {
			return err
		}
		switch a.Type {
		case vfs.TypeDir:
			ents, err := dirEntries(tx, a.Ino)
			if err != nil {
				return err
			}
			out = &fsDir{info: info, ents: ents}
		case vfs.TypeFile:
			file := &fsFile{fs: f, info: info, ino: a.Ino, size: int64(a.Size)}
			if !f.frozen {
				// Live: read whole now, so the file is one version.
				file.data = make([]byte, a.Size)
				if _, err := tx.Read(a.Ino, 0, file.data); err != nil {
					return err
				}
			}
			out = file
		default:
			out = &fsFile{fs: f, info: info, data: []byte{}}
		}
		return nil
	})
	if err != nil {
		return nil, f.pathErr("open", name, err)
	}
	return out, nil
}

// ReadFile returns the content of file name, following symlinks.
func (f *FS) ReadFile(name string) ([]byte, error) {
	p, err := vaultPath("readfile", name)
	if err != nil {
		return nil, err
	}
	var b []byte
	err = f.st.View(func(tx *vfs.Tx) (err error) {
		b, err = tx.ReadFile(p)
		return err
	})
	if err != nil {
		return nil, f.pathErr("readfile", name, err)
	}
	return b, nil
}

// ReadDir lists directory name, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := vaultPath("readdir", name)
	if err != nil {
		return nil, err
	}
	var out []fs.DirEntry
	err = f.st.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, true)
		if err != nil {
			return err
		}
		if a.Type != vfs.TypeDir {
			return errs.E("readdir", p, syscall.ENOTDIR)
		}
		out, err = dirEntries(tx, a.Ino)
		return err
	})
	if err != nil {
		return nil, f.pathErr("readdir", name, err)
	}
	return out, nil
}

// Stat describes file name, following symlinks.
func (f *FS) Stat(name string) (fs.FileInfo, error) { return f.stat("stat", name, true) }

// Lstat describes file name without following a final symlink.
func (f *FS) Lstat(name string) (fs.FileInfo, error) { return f.stat("lstat", name, false) }

func (f *FS) stat(op, name string, follow bool) (fs.FileInfo, error) {
	p, err := vaultPath(op, name)
	if err != nil {
		return nil, err
	}
	var info fs.FileInfo
	err = f.st.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, follow)
		if err != nil {
			return err
		}
		info, err = fileInfo(tx, baseName(name), a)
		return err
	})
	if err != nil {
		return nil, f.pathErr(op, name, err)
	}
	return info, nil
}

// ReadLink returns the target of symlink name.
func (f *FS) ReadLink(name string) (string, error) {
	p, err := vaultPath("readlink", name)
	if err != nil {
		return "", err
	}
	var target string
	err = f.st.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, false)
		if err != nil {
			return err
		}
		if a.Type != vfs.TypeSymlink {
			return errs.E("readlink", p, syscall.EINVAL)
		}
		target, err = tx.Readlink(a.Ino)
		return err
	})
	if err != nil {
		return "", f.pathErr("readlink", name, err)
	}
	return target, nil
}

func baseName(name string) string {
	if name == "." {
		return "."
	}
	_, base := vfs.SplitPath("/" + name)
	return base
}

func dirEntries(tx *vfs.Tx, dir vfs.Ino) ([]fs.DirEntry, error) {
	ents, err := tx.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		a, err := tx.GetAttr(e.Ino)
		if err != nil {
			return nil, err
		}
		info, err := fileInfo(tx, e.Name, a)
		if err != nil {
			return nil, err
		}
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return out, nil
}

// fsInfo is an fs.FileInfo of a vault's file.
type fsInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (i *fsInfo) Name() string       { return i.name }
func (i *fsInfo) Size() int64        { return i.size }
func (i *fsInfo) Mode() fs.FileMode  { return i.mode }
func (i *fsInfo) ModTime() time.Time { return i.modTime }
func (i *fsInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fsInfo) Sys() any           { return nil }

var typeMode = map[vfs.FileType]fs.FileMode{
	vfs.TypeDir: fs.ModeDir, vfs.TypeSymlink: fs.ModeSymlink, vfs.TypeFifo: fs.ModeNamedPipe,
	vfs.TypeSocket: fs.ModeSocket, vfs.TypeChar: fs.ModeDevice | fs.ModeCharDevice, vfs.TypeBlock: fs.ModeDevice,
}

func fileInfo(tx *vfs.Tx, name string, a vfs.Attr) (*fsInfo, error) {
	mode := fs.FileMode(a.Mode).Perm() | typeMode[a.Type]
	if a.Mode&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if a.Mode&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if a.Mode&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	info := &fsInfo{name: name, mode: mode, modTime: a.Mtime.UTC()}
	switch a.Type {
	case vfs.TypeFile:
		info.size = int64(a.Size)
	case vfs.TypeSymlink:
		t, err := tx.Readlink(a.Ino)
		if err != nil {
			return nil, err
		}
		info.size = int64(len(t))
	}
	return info, nil
}

// fsFile is an open file of an FS: its content, or for a frozen state its
// inode, read on demand.
type fsFile struct {
	fs   *FS
	info *fsInfo
	ino  vfs.Ino
	size int64
	data []byte // the content, read at Open; nil: read from ino
	off  int64
	// chunk is the chunk of ino at chunkIndex, the last one read.
	chunk      []byte
	chunkIndex int64
	closed     bool
}

func (f *fsFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *fsFile) Close() error {
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.info.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

func (f *fsFile) Read(b []byte) (int, error) {
	n, err := f.ReadAt(b, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads len(b) bytes from off (fewer, with io.EOF, at the end).
func (f *fsFile) ReadAt(b []byte, off int64) (int, error) {
	if f.closed {
		return 0, &fs.PathError{Op: "read", Path: f.info.name, Err: fs.ErrClosed}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.info.name, Err: fs.ErrInvalid}
	}
	size := f.size
	if f.data != nil {
		size = int64(len(f.data))
	}
	if off >= size {
		return 0, io.EOF
	}
	want := b[:min(int64(len(b)), size-off)]
	n := 0
	if f.data != nil {
		n = copy(want, f.data[off:])
	}
	for n < len(want) {
		// A frozen state's file is read a chunk at a time, and the last
		// chunk is kept: reads of a few bytes each cost no transaction.
		pos := off + int64(n)
		index := pos / vfs.ChunkSize
		if f.chunk == nil || f.chunkIndex != index {
			buf := make([]byte, min(vfs.ChunkSize, size-index*vfs.ChunkSize))
			if err := f.fs.st.View(func(tx *vfs.Tx) error {
				_, err := tx.Read(f.ino, index*vfs.ChunkSize, buf)
				return err
			}); err != nil {
				return n, &fs.PathError{Op: "read", Path: f.info.name, Err: wrapErr(err)}
			}
			f.chunk, f.chunkIndex = buf, index
		}
		n += copy(want[n:], f.chunk[pos-index*vfs.ChunkSize:])
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *fsFile) Seek(offset int64, whence int) (int64, error) {
	if f.closed {
		return 0, &fs.PathError{Op: "seek", Path: f.info.name, Err: fs.ErrClosed}
	}
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.info.size
	case io.SeekStart:
	default:
		offset = -1
	}
	if offset < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.info.name, Err: fs.ErrInvalid}
	}
	f.off = offset
	return offset, nil
}

// fsDir is an open directory of an FS, its entries read at Open.
type fsDir struct {
	info   *fsInfo
	ents   []fs.DirEntry
	closed bool
}

func (d *fsDir) Stat() (fs.FileInfo, error) { return d.info, nil }

func (d *fsDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: wrapErr(errs.E("read", "", syscall.EISDIR))}
}

func (d *fsDir) Close() error {
	if d.closed {
		return &fs.PathError{Op: "close", Path: d.info.name, Err: fs.ErrClosed}
	}
	d.closed = true
	return nil
}

// ReadDir returns the next n entries (all that are left when n <= 0), as
// fs.ReadDirFile says.
func (d *fsDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.closed {
		return nil, &fs.PathError{Op: "readdir", Path: d.info.name, Err: fs.ErrClosed}
	}
	if n <= 0 {
		out := d.ents
		d.ents = nil
		return out, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.ents))
	out := d.ents[:n:n]
	d.ents = d.ents[n:]
	return out, nil
}
