//go:build linux

package overlay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// MaxStack is the most lower dirs one mount takes (the kernel's
// OVL_MAX_STACK is 500); a deeper stack is squashed before it is mounted.
const MaxStack = 128

// Format says which xattr namespace the overlay's markers (whiteouts,
// opaque dirs, origins) use: trusted.overlay.* as root in the initial
// user namespace, user.overlay.* with the userxattr option inside one.
type Format string

const (
	Trusted Format = "trusted"
	User    Format = "user"
)

// prefix is the xattr name prefix of the format's markers.
func (f Format) prefix() string { return string(f) + ".overlay." }

// Stack is what one overlay mount is made of: lower dirs newest first, a
// fresh upper dir and its work dir (on the same filesystem).
type Stack struct {
	Lowers []string
	// Data are data-only lower layers, below Lowers: only a metacopy
	// stub's absolute redirect reaches them (the Shared layout's store).
	Data   []string
	Upper  string
	Work   string
	Format Format
	// ReadOnly mounts it read-only: writes fail with EROFS and the
	// upper stays empty.
	ReadOnly bool
	// Volatile skips every sync of the upper (overlayfs's volatile
	// option): fsync in the mount returns at once, and the unmount does
	// not sync the upper's whole host filesystem, which cost a run
	// 50-190 ms on a shared disk. For an upper that is ingested and
	// never mounted again; what survives a host crash is not known
	// (the run records the boot it ran in: see Recover).
	Volatile bool
}

// Mount mounts s on target with the new mount API: one lowerdir+ per
// layer, so that deep stacks do not hit the one-page limit of mount(2)'s
// option string. Directory redirects and metacopy are off, so that an
// upper dir holds only whole files, whiteouts and opaque dirs: what
// Ingest reads, and what a later mount can stack as a lower. A data-only
// layer needs neither: the kernel follows a lower stub's redirect into
// it with metacopy off, and a copy-up of a stub copies the whole data.
func Mount(s Stack, target string) error {
	if len(s.Lowers) == 0 || len(s.Lowers) > MaxStack {
		return &errs.Error{Kind: errs.InvalidInput, Op: "overlay mount", Path: target,
			Err: fmt.Errorf("%d lower dirs; a mount takes 1 to %d", len(s.Lowers), MaxStack)}
	}
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return mountErr(target, "fsopen", err)
	}
	defer unix.Close(fd)
	set := func(k, v string) error {
		if err := unix.FsconfigSetString(fd, k, v); err != nil {
			return mountErr(target, fmt.Sprintf("fsconfig %s=%s", k, v), err)
		}
		return nil
	}
	for _, l := range s.Lowers {
		if err := set("lowerdir+", l); err != nil {
			return err
		}
	}
	for _, l := range s.Data {
		if err := set("datadir+", l); err != nil {
			return err
		}
	}
	if s.Upper != "" {
		if err := set("upperdir", s.Upper); err != nil {
			return err
		}
		if err := set("workdir", s.Work); err != nil {
			return err
		}
		if s.Volatile {
			if err := unix.FsconfigSetFlag(fd, "volatile"); err != nil {
				return mountErr(target, "fsconfig volatile", err)
			}
		}
	}
	if s.Format == User {
		if err := unix.FsconfigSetFlag(fd, "userxattr"); err != nil {
			return mountErr(target, "fsconfig userxattr", err)
		}
	} else {
		for _, kv := range [][2]string{{"redirect_dir", "off"}, {"metacopy", "off"}, {"index", "off"}} {
			if err := set(kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return mountErr(target, "fsconfig create", err)
	}
	attrs := 0
	if s.ReadOnly {
		attrs = unix.MOUNT_ATTR_RDONLY
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return mountErr(target, "fsmount", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return mountErr(target, "move_mount", err)
	}
	return nil
}

func mountErr(target, step string, err error) error {
	return &errs.Error{Kind: errs.IoError, Op: "overlay mount", Path: target, Err: fmt.Errorf("%s: %w", step, err),
		Hint: "overlayfs needs root (or a user namespace of the run's own); --transport fuse works everywhere"}
}

// Unmount detaches the overlay at target; lazy when it is busy (a process
// that left the command's group holds a file open).
func Unmount(target string) error {
	err := unix.Unmount(target, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: not mounted
		return &errs.Error{Kind: errs.IoError, Op: "overlay unmount", Path: target, Err: err}
	}
	return nil
}

// Probe says whether this process can mount an overlay with format f, by
// mounting a tiny one in scratch (a dir it may write) and checking that a
// whiteout in the lower hides the file below it: a kernel that ignored
// the markers (user.overlay.* without userxattr) would show it.
func Probe(scratch string, f Format) error {
	dir, err := probeStack(scratch)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m := filepath.Join(dir, "m")
	if err := Mount(probeLayers(dir, f), m); err != nil {
		return err
	}
	defer Unmount(m)
	return probeCheck(m, f)
}

// probeStack makes the layers of a probe in a new dir of scratch: l1
// holds a file, l2 a whiteout of it; u, w and m are empty.
func probeStack(scratch string) (string, error) {
	dir, err := os.MkdirTemp(scratch, ".probe-")
	if err != nil {
		return "", &errs.Error{Kind: errs.IoError, Op: "overlay probe", Path: scratch, Err: err}
	}
	p := func(s string) string { return filepath.Join(dir, s) }
	for _, d := range []string{"l1", "l2", "u", "w", "m"} {
		if err := os.Mkdir(p(d), 0o700); err != nil {
			os.RemoveAll(dir)
			return "", &errs.Error{Kind: errs.IoError, Op: "overlay probe", Path: dir, Err: err}
		}
	}
	err = os.WriteFile(p("l1/gone"), nil, 0o600)
	if err == nil {
		err = writeWhiteout(p("l2/gone"))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", &errs.Error{Kind: errs.IoError, Op: "overlay probe", Path: dir, Err: err}
	}
	return dir, nil
}

func probeLayers(dir string, f Format) Stack {
	p := func(s string) string { return filepath.Join(dir, s) }
	return Stack{Lowers: []string{p("l2"), p("l1")}, Upper: p("u"), Work: p("w"), Format: f}
}

// probeCheck fails when the probe's whiteout does not hide its name in
// the mount at m.
func probeCheck(m string, f Format) error {
	if _, err := os.Lstat(filepath.Join(m, "gone")); !errors.Is(err, os.ErrNotExist) {
		return &errs.Error{Kind: errs.IoError, Op: "overlay probe", Path: m,
			Err: fmt.Errorf("the kernel ignored a whiteout with %s markers", f)}
	}
	return nil
}

// writeWhiteout makes the c 0 0 device that deletes a name of the layers
// below.
func writeWhiteout(path string) error {
	return unix.Mknod(path, unix.S_IFCHR|0o600, 0)
}
