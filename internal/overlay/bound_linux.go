//go:build linux

package overlay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// A run on a vault with a size quota writes its upper dir into a tmpfs of
// its own, sized so that a runaway write fails with ENOSPC inside the
// command instead of filling the host's disk; the ingest's quota check
// stays the authority (a run within the bound but over the quota is
// refused whole). The bound is the whole quota, not the room left: the
// upper holds whole copies of the files the run touched, all of them
// files of the state the run leaves, so a run that stays within the quota
// never needs more than the quota there, however large the files it
// edits in place. boundSlack covers tmpfs's page rounding (a 100-byte
// file takes a 4 KiB page) and the work dir.
//
// A tmpfs lives in memory (and swap): only a quota of at most a quarter
// of the host's RAM is bounded this way. Without a quota, or with a
// larger one, the upper is a dir of the layer cache on the runtime
// dir's filesystem, as before, and only the ingest checks.
const (
	boundSlack    = 16 << 20
	boundRAMShare = 4 // the bound may be at most MemTotal / boundRAMShare
)

// upperBound is the size of the tmpfs a run on v writes its upper into,
// or 0 when the upper is not bounded.
func upperBound(v *vfs.Vault) (int64, error) {
	var q vfs.Quota
	if err := v.View(func(tx *vfs.Tx) (err error) { q, err = tx.Quota(); return err }); err != nil {
		return 0, err
	}
	if q.MaxSizeMB <= 0 || q.MaxSizeMB > vfs.MaxQuotaMB>>3 {
		return 0, nil
	}
	quota := q.MaxSizeMB << 20
	bound := quota + quota/4 + boundSlack
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, nil
	}
	if ram := int64(si.Totalram) * int64(si.Unit); bound > ram/boundRAMShare {
		return 0, nil
	}
	return bound, nil
}

// mountBound mounts a tmpfs of size bytes on dir: the fs of a bounded
// run's upper and work dirs.
func mountBound(dir string, size int64) error {
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0755"
	if err := unix.Mount("avfs-upper", dir, "tmpfs", unix.MS_NOSUID, opts); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "overlay run", Path: dir,
			Err: fmt.Errorf("mounting the upper's tmpfs (%s): %w", opts, err)}
	}
	return nil
}

// copyUpper copies an upper dir into dst (which must not exist) as it is:
// whiteouts, opaque dirs and every xattr, owners, modes, times and hard
// links. A bounded run's upper is copied rather than moved into the
// cache, being on a tmpfs of its own.
func copyUpper(src, dst string) error {
	links := map[[2]uint64]string{}
	var walk func(s, d string) error
	walk = func(s, d string) error {
		var st unix.Stat_t
		if err := unix.Lstat(s, &st); err != nil {
			return err
		}
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
			if first, ok := links[key]; ok {
				return os.Link(first, d)
			}
			links[key] = d
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			ents, err := os.ReadDir(s)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := walk(filepath.Join(s, e.Name()), filepath.Join(d, e.Name())); err != nil {
					return err
				}
			}
		case unix.S_IFREG:
			if err := copyUpperFile(s, d); err != nil {
				return err
			}
		case unix.S_IFLNK:
			t, err := os.Readlink(s)
			if err != nil {
				return err
			}
			if err := os.Symlink(t, d); err != nil {
				return err
			}
		default: // whiteouts (c 0 0), fifos, sockets, devices
			if err := unix.Mknod(d, st.Mode, int(st.Rdev)); err != nil {
				return err
			}
		}
		return copyUpperMeta(s, d, &st)
	}
	return walk(src, dst)
}

func copyUpperFile(s, d string) error {
	in, err := os.Open(s)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(d, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = out.ReadFrom(in)
	return errors.Join(err, out.Close())
}

// copyUpperMeta gives d the xattrs, owner, mode and times of s.
func copyUpperMeta(s, d string, st *unix.Stat_t) error {
	names, err := listXattrs(s)
	if err != nil {
		return err
	}
	for _, n := range names {
		val, err := getXattr(s, n)
		if err != nil {
			return err
		}
		if err := unix.Lsetxattr(d, n, val, 0); err != nil {
			return err
		}
	}
	if err := unix.Lchown(d, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := unix.Chmod(d, st.Mode&0o7777); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, d, ts, unix.AT_SYMLINK_NOFOLLOW)
}
