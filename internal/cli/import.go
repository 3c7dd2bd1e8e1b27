package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// txBudget is about how many bytes of file data one import transaction
// writes before it commits and the next one starts.
const txBudget = 4 << 20

// txOps bounds the metadata operations of one import transaction.
const txOps = 2000

// hostEntry is one file found under the import source, as lstat saw it.
type hostEntry struct {
	rel  string // slash-separated path below the source; "" is the source itself
	info fs.FileInfo
}

type devIno struct{ dev, ino uint64 }

// statOf returns a host file's identity and link count.
func statOf(info fs.FileInfo) (devIno, uint64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return devIno{}, 1
	}
	return devIno{uint64(st.Dev), uint64(st.Ino)}, uint64(st.Nlink)
}

// importer copies a host tree into a vault as a sequence of transactions,
// each a run of steps: one step makes one name, or writes one chunk of
// the file being copied.
type importer struct {
	a       *app
	v       *vfs.Vault
	src     string // host path of the source
	entries []hostEntry
	next    int
	dirIno  map[string]vfs.Ino // rel path of a directory -> its vault inode
	fileDir vfs.Ino            // the directory a single-file source goes to
	links   map[devIno]vfs.Ino // host file -> vault inode, for hard links
	dirs    []dirAttrs         // set once their content is in
	res     *transferResult
	prog    *progress
	buf     []byte
	// The file being copied, when a step is in the middle of one.
	cur    *os.File
	curIno vfs.Ino
	curOff int64
	curEnd int64
	curE   *hostEntry
	// curMode is the mode the file gets when it is put in place.
	curMode uint32
	// stages are those not yet in place in a committed transaction.
	stages []vfs.Ino
}

type dirAttrs struct {
	ino  vfs.Ino
	info fs.FileInfo
}

func (a *app) importTree(v *vfs.Vault, hostPath, vaultPath string) (*transferResult, error) {
	info, err := os.Lstat(hostPath)
	if err != nil {
		return nil, hostErr("import", hostPath, err)
	}
	abs, _ := filepath.Abs(hostPath)
	im := &importer{a: a, v: v, src: hostPath, dirIno: map[string]vfs.Ino{}, links: map[devIno]vfs.Ino{},
		buf: make([]byte, ioStep), prog: a.newProgress("import")}
	im.res = &transferResult{Source: abs, Vault: v.Name(), Skipped: []skipped{}, verb: "imported"}
	defer im.prog.done()
	defer im.closeCur()

	// Where the source goes, decided in one transaction.
	var dest string
	err = v.Update(func(tx *vfs.Tx) error {
		var err error
		dest, err = im.destination(tx, info, vaultPath)
		return err
	})
	if err != nil {
		return nil, err
	}
	im.res.Destination = dest
	if err := im.walk(info); err != nil {
		return nil, err
	}
	for im.next < len(im.entries) || im.cur != nil {
		err := a.ctx.Err()
		if err == nil {
			err = v.Update(im.batch)
		}
		if err != nil {
			return nil, im.abort(err)
		}
		im.stages = im.stages[:0] // those put in place are committed
		if im.cur != nil {
			im.stages = append(im.stages, im.curIno)
		}
	}
	if err := im.finishDirs(); err != nil {
		return nil, err
	}
	collectAfterWrite(v)
	return im.res, nil
}

// destination makes sure the place the source goes exists and returns
// its vault path. A directory source maps to a directory.
func (im *importer) destination(tx *vfs.Tx, info fs.FileInfo, vaultPath string) (string, error) {
	if vaultPath == "" {
		vaultPath = "/"
	}
	dest, err := vfs.CleanPath(vaultPath)
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		at, err := tx.MkdirAll(dest, 0o755)
		if err != nil {
			return "", err
		}
		im.dirIno[""] = at.Ino
		return dest, nil
	}
	name := filepath.Base(im.src)
	if at, err := tx.Resolve(dest, true); err == nil && at.Type == vfs.TypeDir {
		dest = path.Join(dest, name)
	} else if d, _ := vfs.SplitPath(dest); d != "/" {
		if _, err := tx.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	dir, _, err := tx.ResolveParent(dest)
	if err != nil {
		return "", err
	}
	im.fileDir = dir
	return dest, nil
}

// walk lists the source tree without following any symlink.
func (im *importer) walk(root fs.FileInfo) error {
	if !root.IsDir() {
		im.entries = append(im.entries, hostEntry{rel: "", info: root})
		im.prog.setTotal(1, root.Size())
		return nil
	}
	var files int
	var bytes int64
	err := filepath.WalkDir(im.src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return hostErr("import", p, err)
		}
		if err := im.a.ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(im.src, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			im.dirs = append(im.dirs, dirAttrs{ino: im.dirIno[""], info: root})
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return hostErr("import", p, err)
		}
		im.entries = append(im.entries, hostEntry{rel: rel, info: info})
		files++
		if info.Mode().IsRegular() {
			bytes += info.Size()
		}
		return nil
	})
	im.prog.setTotal(files, bytes)
	return err
}

// batch runs steps in one transaction until its budget is spent.
func (im *importer) batch(tx *vfs.Tx) error {
	budget, ops := txBudget, 0
	for (im.next < len(im.entries) || im.cur != nil) && budget > 0 && ops < txOps {
		n, err := im.step(tx)
		if err != nil {
			return err
		}
		budget -= n
		ops++
	}
	return nil
}

// step makes the next name, or writes the next chunk of the current file.
// It returns how many bytes of data it wrote.
func (im *importer) step(tx *vfs.Tx) (int, error) {
	if im.cur != nil {
		return im.copyChunk(tx)
	}
	e := &im.entries[im.next]
	im.next++
	parent, name, vpath := im.place(e.rel)
	mode := uint32(e.info.Mode().Perm()) | specialBits(e.info.Mode())
	switch {
	case e.info.IsDir():
		at, err := tx.Lookup(parent, name)
		switch {
		case err == nil && at.Type != vfs.TypeDir:
			return 0, errs.E("import", vpath, syscall.ENOTDIR)
		case errs.Is(err, errs.NotFound):
			at, err = tx.Mkdir(parent, name, mode, 0, 0)
		}
		if err != nil {
			return 0, withPath(err, vpath)
		}
		im.dirIno[e.rel] = at.Ino
		im.dirs = append(im.dirs, dirAttrs{ino: at.Ino, info: e.info})
		im.res.Dirs++
		im.prog.add(1, 0)
	case e.info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(filepath.Join(im.src, filepath.FromSlash(e.rel)))
		if err != nil {
			return 0, hostErr("import", e.rel, err)
		}
		if err := replaceable(tx, parent, name, vpath); err != nil {
			return 0, err
		}
		at, err := tx.Symlink(parent, name, target, 0, 0)
		if err != nil {
			return 0, withPath(err, vpath)
		}
		mt := e.info.ModTime()
		if _, err := tx.SetAttr(at.Ino, vfs.SetAttr{Mtime: &mt, Atime: &mt}); err != nil {
			return 0, err
		}
		im.res.Symlinks++
		im.prog.add(1, 0)
	case e.info.Mode().IsRegular():
		return im.startFile(tx, e, parent, name, vpath, mode)
	default:
		im.res.Skipped = append(im.res.Skipped, skipped{Path: vpath, Reason: "not a regular file, directory or symlink (" + e.info.Mode().Type().String() + ")"})
		im.prog.add(1, 0)
	}
	return 0, nil
}

// place returns the vault directory and name an entry goes to.
func (im *importer) place(rel string) (vfs.Ino, string, string) {
	if rel == "" { // a single-file import
		_, name := vfs.SplitPath(im.res.Destination)
		return im.fileDir, name, im.res.Destination
	}
	dir, name := path.Split(rel)
	return im.dirIno[strings.TrimSuffix(dir, "/")], name, path.Join(im.res.Destination, rel)
}

// replaceable clears dir/name for a new non-directory: an existing file
// or link is removed, an existing directory refused.
func replaceable(tx *vfs.Tx, dir vfs.Ino, name, vpath string) error {
	at, err := tx.Lookup(dir, name)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return withPath(err, vpath)
	}
	if at.Type == vfs.TypeDir {
		return &errs.Error{Kind: errs.NotAFile, Op: "import", Path: vpath, Errno: syscall.EISDIR,
			Err: errors.New("a directory in the vault is in the way of a file")}
	}
	return withPath(tx.Unlink(dir, name), vpath)
}

// startFile starts copying a regular file and returns how many bytes of
// data it wrote. A hard link to a file already copied is made at once, and
// a file of one step is copied whole in this step; a larger one goes to a
// stage (vfs.Tx.Stage) that copyChunk fills and puts in place. Either way
// a file refused half-way (a quota) leaves the vault's file at its name as
// it was.
func (im *importer) startFile(tx *vfs.Tx, e *hostEntry, parent vfs.Ino, name, vpath string, mode uint32) (int, error) {
	id, nlink := statOf(e.info)
	if ino, ok := im.links[id]; ok && nlink > 1 {
		if err := replaceable(tx, parent, name, vpath); err != nil {
			return 0, err
		}
		if _, err := tx.Link(ino, parent, name); err != nil {
			return 0, withPath(err, vpath)
		}
		im.res.Hardlinks++
		im.prog.add(1, 0)
		return 0, nil
	}
	hp := filepath.Join(im.src, filepath.FromSlash(e.rel))
	f, err := os.OpenFile(hp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, hostErr("import", hp, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, e.info) {
		f.Close()
		im.res.Skipped = append(im.res.Skipped, skipped{Path: vpath, Reason: "changed on the host during the import"})
		return 0, nil
	}
	if fi.Size() <= int64(len(im.buf)) {
		defer f.Close()
		return im.smallFile(tx, f, fi.Size(), e, parent, name, vpath, mode, id, nlink)
	}
	var replaced vfs.Ino // a file whose bytes the stage may count on
	cur, err := tx.Lookup(parent, name)
	switch {
	case err == nil && cur.Type == vfs.TypeDir:
		f.Close()
		return 0, &errs.Error{Kind: errs.NotAFile, Op: "import", Path: vpath, Errno: syscall.EISDIR,
			Err: errors.New("a directory in the vault is in the way of a file")}
	case err == nil && cur.Type == vfs.TypeFile && cur.Nlink == 1:
		replaced = cur.Ino
	case err != nil && !errs.Is(err, errs.NotFound):
		f.Close()
		return 0, withPath(err, vpath)
	}
	stage, err := tx.Stage(replaced, false)
	if err != nil {
		f.Close()
		return 0, withPath(err, vpath)
	}
	if nlink > 1 {
		im.links[id] = stage // PlaceStage keeps the inode
	}
	im.cur, im.curIno, im.curOff, im.curEnd, im.curE = f, stage, 0, fi.Size(), e
	im.stages = append(im.stages, stage)
	im.curMode = mode
	im.res.Files++
	return 0, nil
}

// smallFile copies a file of at most one step whole, in one step: the
// name is replaced, the file made and written, in the same transaction.
func (im *importer) smallFile(tx *vfs.Tx, f *os.File, size int64, e *hostEntry, parent vfs.Ino, name, vpath string,
	mode uint32, id devIno, nlink uint64) (int, error) {
	n, err := f.ReadAt(im.buf[:size], 0)
	if err != nil && err != io.EOF {
		return 0, hostErr("import", f.Name(), err)
	}
	if err := replaceable(tx, parent, name, vpath); err != nil {
		return 0, err
	}
	at, err := tx.Create(parent, name, mode, 0, 0)
	if err == nil && n > 0 {
		_, err = tx.Write(at.Ino, 0, im.buf[:n])
	}
	if err != nil {
		return 0, withPath(err, vpath)
	}
	mt := e.info.ModTime()
	if _, err := tx.SetAttr(at.Ino, vfs.SetAttr{Mtime: &mt, Atime: &mt}); err != nil {
		return 0, err
	}
	if nlink > 1 {
		im.links[id] = at.Ino
	}
	im.res.Files++
	im.res.Bytes += int64(n)
	im.prog.add(1, int64(n))
	return n, nil
}

// abort drops, when err stopped the import, the stages not yet in place
// in a committed transaction: the file being copied, and those the failed
// transaction put in place.
func (im *importer) abort(err error) error {
	im.closeCur()
	aerr := im.v.Update(func(tx *vfs.Tx) error {
		for _, s := range im.stages {
			if err := tx.AbortStage(s); err != nil {
				return err
			}
		}
		return nil
	})
	if aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// copyChunk writes the next step of the current file, and its times once
// all of it is in. A file that grows meanwhile is copied up to the size
// it had when opened.
func (im *importer) copyChunk(tx *vfs.Tx) (int, error) {
	want := min(int64(len(im.buf)), im.curEnd-im.curOff)
	n := 0
	if want > 0 {
		var err error
		n, err = im.cur.ReadAt(im.buf[:want], im.curOff)
		if err != nil && err != io.EOF {
			return 0, hostErr("import", im.cur.Name(), err)
		}
		if n > 0 {
			if _, err := tx.Write(im.curIno, im.curOff, im.buf[:n]); err != nil {
				_, _, vpath := im.place(im.curE.rel)
				return 0, withPath(err, vpath)
			}
			im.curOff += int64(n)
			im.res.Bytes += int64(n)
			im.prog.add(0, int64(n))
		}
	}
	if n == 0 || im.curOff >= im.curEnd {
		parent, name, vpath := im.place(im.curE.rel)
		if err := replaceable(tx, parent, name, vpath); err != nil {
			return n, err
		}
		if _, err := tx.PlaceStage(im.curIno, parent, name, im.curMode); err != nil {
			return n, withPath(err, vpath)
		}
		mt := im.curE.info.ModTime()
		if _, err := tx.SetAttr(im.curIno, vfs.SetAttr{Mtime: &mt, Atime: &mt}); err != nil {
			return n, err
		}
		im.closeCur()
		im.prog.add(1, 0)
	}
	return n, nil
}

func (im *importer) closeCur() {
	if im.cur != nil {
		im.cur.Close()
		im.cur = nil
	}
}

// finishDirs sets directory modes and times, deepest first, once nothing
// more is added to them.
func (im *importer) finishDirs() error {
	for len(im.dirs) > 0 {
		err := im.v.Update(func(tx *vfs.Tx) error {
			for n := 0; n < txOps && len(im.dirs) > 0; n++ {
				d := im.dirs[len(im.dirs)-1]
				mode := uint32(d.info.Mode().Perm()) | specialBits(d.info.Mode())
				mt := d.info.ModTime()
				if _, err := tx.SetAttr(d.ino, vfs.SetAttr{Mode: &mode, Mtime: &mt, Atime: &mt}); err != nil {
					return err
				}
				im.dirs = im.dirs[:len(im.dirs)-1]
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// specialBits are the setuid, setgid and sticky bits of a Go file mode as
// Unix permission bits.
func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// withPath gives a typed error the full vault path it is about when it
// names none, or only a name within a directory.
func withPath(err error, vpath string) error {
	var e *errs.Error
	if vpath != "" && errors.As(err, &e) && !strings.HasPrefix(e.Path, "/") && !isCheckpointErr(e) {
		e.Path = vpath
	}
	return err
}

// isCheckpointErr reports an error whose Path is a checkpoint's name.
func isCheckpointErr(e *errs.Error) bool {
	return e.Kind == errs.CheckpointNotFound || strings.HasPrefix(e.Op, "checkpoint")
}

// hostErr types an error of the host filesystem, naming the host path.
func hostErr(op, hostPath string, err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return errs.Host(op, hostPath, fmt.Errorf("host path %s: %w", hostPath, unwrapPathErr(err)))
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
