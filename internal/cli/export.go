package cli

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// exporter writes a vault tree below one host directory. Every host
// directory is reached by openat from its parent's descriptor with
// O_NOFOLLOW, and every file is created with O_EXCL|O_NOFOLLOW, so no
// name the vault holds and no symlink already on the host can make it
// write anywhere but below the root.
type exporter struct {
	a     *app
	tx    *vfs.Tx
	root  int    // descriptor of HOST_DIR
	host  string // HOST_DIR, for messages
	force bool
	links map[vfs.Ino]string // vault inode -> rel host path of its first name
	dirs  vfs.DirWalk        // the vault directories exported, so a cycle stops the walk
	res   *transferResult
	prog  *progress
	buf   []byte
}

func (a *app) exportTree(st vfs.StateRef, vaultPath, hostDir string, force bool) (*transferResult, error) {
	v := st.Vault
	src, err := vfs.CleanPath(vaultPath)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(hostDir)
	res := &transferResult{Source: src, Destination: abs, Vault: v.Name(), Skipped: []skipped{}, verb: "exported"}
	ex := &exporter{a: a, host: abs, force: force, links: map[vfs.Ino]string{}, res: res,
		prog: a.newProgress("export"), buf: make([]byte, ioStep)}
	defer ex.prog.done()
	err = st.View(func(tx *vfs.Tx) error {
		ex.tx = tx
		at, err := tx.Resolve(src, true)
		if err != nil {
			return err
		}
		if err := ex.openRoot(hostDir); err != nil {
			return err
		}
		defer unix.Close(ex.root)
		if ex.prog.on {
			files, bytes, err := countTree(tx, &vfs.DirWalk{}, at)
			if err != nil {
				return err
			}
			ex.prog.setTotal(files, bytes)
		}
		if at.Type == vfs.TypeDir {
			return ex.dir(ex.root, at.Ino, "", src)
		}
		if at, err = tx.Resolve(src, false); err != nil {
			return err
		}
		return ex.node(ex.root, baseName(src), at, "", src)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// openRoot creates and opens HOST_DIR. The directory itself is the user's
// choice and may be reached through symlinks; what is below it is not.
func (ex *exporter) openRoot(hostDir string) error {
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return hostErr("export", hostDir, err)
	}
	root, err := unix.Open(hostDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return hostErr("export", hostDir, err)
	}
	ex.root = root
	return nil
}

// countTree counts what is below a directory, for the progress bar.
func countTree(tx *vfs.Tx, w *vfs.DirWalk, at vfs.Attr) (files int, bytes int64, err error) {
	if at.Type != vfs.TypeDir {
		return 1, int64(at.Size), nil
	}
	if err := w.Enter(at.Ino); err != nil {
		return 0, 0, err
	}
	ents, err := tx.ReadDir(at.Ino)
	for _, e := range ents {
		cat, err := tx.GetAttr(e.Ino)
		if err != nil {
			return files, bytes, err
		}
		f, b, err := countTree(tx, w, cat)
		files, bytes = files+f, bytes+b
		if cat.Type == vfs.TypeDir {
			files++
		}
		if err != nil {
			return files, bytes, err
		}
	}
	return files, bytes, err
}

// safeName reports whether a vault name can be used as one host path
// component. The vault never holds others; this does not trust it to.
func safeName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// dir exports the entries of vault directory ino into host directory fd.
func (ex *exporter) dir(fd int, ino vfs.Ino, rel, vpath string) error {
	if err := ex.dirs.Enter(ino); err != nil {
		return err
	}
	ents, err := ex.tx.ReadDir(ino)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ex.a.ctx.Err(); err != nil {
			return err
		}
		at, err := ex.tx.GetAttr(e.Ino)
		if err != nil {
			return err
		}
		if err := ex.node(fd, e.Name, at, rel, path.Join(vpath, e.Name)); err != nil {
			return err
		}
	}
	return nil
}

// node exports one vault inode as name in host directory fd.
func (ex *exporter) node(fd int, name string, at vfs.Attr, rel, vpath string) error {
	if !safeName(name) {
		ex.res.Skipped = append(ex.res.Skipped, skipped{Path: vpath, Reason: "name cannot be used on the host"})
		return nil
	}
	hrel := path.Join(rel, name)
	times := []unix.Timespec{unix.NsecToTimespec(at.Atime.UnixNano()), unix.NsecToTimespec(at.Mtime.UnixNano())}
	mode := at.Mode &^ 0o6000 // never hand out setuid or setgid files
	switch at.Type {
	case vfs.TypeDir:
		sub, err := ex.mkdir(fd, name, hrel)
		if err != nil {
			return err
		}
		err = ex.dir(sub, at.Ino, hrel, vpath)
		if err == nil {
			err = ex.hostCall("chmod", hrel, unix.Fchmod(sub, mode))
		}
		unix.Close(sub)
		if err != nil {
			return err
		}
		ex.res.Dirs++
		ex.prog.add(1, 0)
	case vfs.TypeFile:
		if first, ok := ex.links[at.Ino]; ok {
			if err := ex.link(first, fd, name, hrel); err != nil {
				return err
			}
			ex.res.Hardlinks++
			ex.prog.add(1, 0)
			return nil
		}
		if err := ex.file(fd, name, hrel, at, mode); err != nil {
			return withPath(err, vpath)
		}
		if at.Nlink > 1 {
			ex.links[at.Ino] = hrel
		}
		ex.res.Files++
		ex.prog.add(1, 0)
	case vfs.TypeSymlink:
		target, err := ex.tx.Readlink(at.Ino)
		if err != nil {
			return err
		}
		err = ex.create(fd, name, hrel, func() error { return unix.Symlinkat(target, fd, name) })
		if err != nil {
			return err
		}
		ex.res.Symlinks++
		ex.prog.add(1, 0)
	default:
		ex.res.Skipped = append(ex.res.Skipped, skipped{Path: vpath, Reason: at.Type.String() + " files are not exported"})
		return nil
	}
	return ex.hostCall("set times", hrel, unix.UtimesNanoAt(fd, name, times, unix.AT_SYMLINK_NOFOLLOW))
}

// mkdir makes (or, when it is already a directory, reuses) name in fd and
// opens it without following a symlink.
func (ex *exporter) mkdir(fd int, name, hrel string) (int, error) {
	for attempt := 0; ; attempt++ {
		err := unix.Mkdirat(fd, name, 0o700)
		if err != nil && err != unix.EEXIST {
			return -1, ex.hostCall("mkdir", hrel, err)
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			return sub, nil
		}
		if (err != unix.ELOOP && err != unix.ENOTDIR) || attempt > 0 {
			return -1, ex.hostCall("open", hrel, err)
		}
		if !ex.force {
			return -1, ex.exists(hrel, "is not a directory on the host (a symlink is never followed)")
		}
		if err := unix.Unlinkat(fd, name, 0); err != nil {
			return -1, ex.hostCall("replace", hrel, err)
		}
	}
}

// create runs mk, which makes name in fd exclusively; an existing file or
// symlink is replaced with --force, never followed.
func (ex *exporter) create(fd int, name, hrel string, mk func() error) error {
	err := mk()
	if err == unix.EEXIST && ex.force {
		if err := unix.Unlinkat(fd, name, 0); err != nil {
			return ex.hostCall("replace", hrel, err)
		}
		err = mk()
	}
	if err == unix.EEXIST {
		return ex.exists(hrel, "already exists on the host")
	}
	return ex.hostCall("create", hrel, err)
}

// file writes a regular file's content, one step at a time.
func (ex *exporter) file(fd int, name, hrel string, at vfs.Attr, mode uint32) error {
	var out int
	err := ex.create(fd, name, hrel, func() (err error) {
		out, err = unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(out), filepath.Join(ex.host, hrel))
	defer f.Close()
	for off := int64(0); off < int64(at.Size); {
		if err := ex.a.ctx.Err(); err != nil {
			return err
		}
		n, err := ex.tx.Read(at.Ino, off, ex.buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if _, err := f.Write(ex.buf[:n]); err != nil {
			return hostErr("export", f.Name(), err)
		}
		off += int64(n)
		ex.res.Bytes += int64(n)
		ex.prog.add(0, int64(n))
	}
	if err := unix.Fchmod(int(f.Fd()), mode); err != nil {
		return ex.hostCall("chmod", hrel, err)
	}
	return hostErr("export", f.Name(), f.Close())
}

// link makes name in fd a hard link to the file first exported at the
// rel path first, whose directory is reached again from the root with
// O_NOFOLLOW at every step.
func (ex *exporter) link(first string, fd int, name, hrel string) error {
	dir, base := path.Split(first)
	pfd, err := ex.openRel(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return err
	}
	defer func() {
		if pfd != ex.root {
			unix.Close(pfd)
		}
	}()
	return ex.create(fd, name, hrel, func() error { return unix.Linkat(pfd, base, fd, name, 0) })
}

// openRel opens a directory below the root, one component at a time.
func (ex *exporter) openRel(rel string) (int, error) {
	fd := ex.root
	if rel == "" {
		return fd, nil
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if fd != ex.root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, ex.hostCall("open", rel, err)
		}
		fd = next
	}
	return fd, nil
}

// hostCall types the error of a host system call on hrel (nil stays nil).
func (ex *exporter) hostCall(op, hrel string, err error) error {
	if err == nil {
		return nil
	}
	hp := filepath.Join(ex.host, filepath.FromSlash(hrel))
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return errs.Host("export", hp, fmt.Errorf("%s %s: %w", op, hp, err))
}

func (ex *exporter) exists(hrel, why string) error {
	hp := filepath.Join(ex.host, filepath.FromSlash(hrel))
	return &errs.Error{Kind: errs.AlreadyExists, Op: "export", Err: fmt.Errorf("%s %s", hp, why),
		Hint: "export into an empty directory, or pass --force to replace files", Extra: map[string]any{"host_path": hp}}
}
