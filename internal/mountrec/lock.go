// Package mountrec keeps what a mount leaves under $AVFS_HOME/mounts/ and
// in the kernel: the records `avfs mounts` lists, the writer lock that
// makes a vault's read-write mount its only writer, the run lock a proxy
// run holds, and the parsing of /proc/self/mountinfo. It serves nothing:
// package mountd serves, and any process may read what is here.
package mountrec

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// The files a mount keeps under $AVFS_HOME/mounts/:
//
//	<vault>.writer   flock held by the process serving a read-write mount
//	                 of <vault>; it holds the mountpoint, for the error a
//	                 second writer gets
//	<key>.json       the record of one mount (Info), flocked by its server
//	                 for as long as it serves; key = hash of the mountpoint
//	<key>.log        the serving process's stdout and stderr
//
// flock locks go with the process: a server that dies, even by SIGKILL,
// frees them, so a free lock always means a dead server.
const mountsDir = "mounts"

// Dir is the directory of h's mount files; it may not exist yet.
func Dir(h *registry.Home) string { return filepath.Join(h.Dir, mountsDir) }

func dirOf(h *registry.Home) (string, error) {
	d := Dir(h)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", &errs.Error{Kind: errs.IoError, Op: "mount", Path: d, Err: err}
	}
	return d, nil
}

// WriterLock is the held writer lock of one vault.
type WriterLock struct {
	once sync.Once
	f    *os.File
}

// LockWriter takes vault's writer lock for a mount at mountpoint. When
// another process holds it, the error is VaultLocked and names that
// process's mountpoint.
func LockWriter(h *registry.Home, vault, mountpoint string) (*WriterLock, error) {
	dir, err := dirOf(h)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, vault+".writer")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Path: path, Err: err}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, LockedErr(vault, strings.TrimSpace(string(b)))
		}
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Path: path, Err: err}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(mountpoint+"\n"), 0)
	}
	return &WriterLock{f: f}, nil
}

// LockedErr is the VaultLocked error of a write to vault while it is
// mounted read-write at mountpoint.
func LockedErr(vault, mountpoint string) *errs.Error {
	if mountpoint == "" {
		mountpoint = "(unknown)"
	}
	return &errs.Error{Kind: errs.VaultLocked, Op: "mount", Vault: vault,
		Err:   fmt.Errorf("vault %q is mounted read-write at %s", vault, mountpoint),
		Hint:  "unmount it first, or mount it --readonly",
		Extra: map[string]any{"mountpoint": mountpoint}}
}

// Release lets the lock go; it may be called more than once.
func (l *WriterLock) Release() {
	l.once.Do(func() {
		_ = l.f.Truncate(0)
		// Unlock explicitly: a child forked meanwhile holds the same open
		// file until it execs, and Close alone would leave it the lock.
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
	})
}

// Writer returns the mountpoint of the live process that mounts vault
// read-write, if there is one: the holder of its writer lock.
func Writer(h *registry.Home, vault string) (mountpoint string, live bool) {
	path := filepath.Join(h.Dir, mountsDir, vault+".writer")
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // the probe must not hold off a mount
		return "", false
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return "", false
	}
	b, _ := io.ReadAll(f)
	mnt := strings.TrimSpace(string(b))
	return mnt, true
}

// fuseMount is one FUSE mount of the kernel's mount table.
type fuseMount struct {
	Dir    string
	FsType string
	Source string
}

// fuseMounts lists the FUSE mounts of this mount namespace.
func fuseMounts() ([]fuseMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []fuseMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 2 || !strings.HasPrefix(qf[0], "fuse") {
			continue
		}
		out = append(out, fuseMount{Dir: unescape(pf[4]), FsType: qf[0], Source: unescape(qf[1])})
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// IsMountpoint reports whether dir is the root of a mount: its device
// differs from its parent's (or it is "/").
func IsMountpoint(dir string) bool {
	var st, pst syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return errors.Is(err, syscall.ENOTCONN) // a FUSE mount whose server died
	}
	if err := syscall.Lstat(filepath.Dir(dir), &pst); err != nil {
		return false
	}
	return st.Dev != pst.Dev || dir == "/"
}

// IsAvfsMount reports whether dir is currently an avfs FUSE mount.
func IsAvfsMount(dir string) bool {
	ms, err := fuseMounts()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.Dir == dir && m.FsType == "fuse.avfs" {
			return true
		}
	}
	return false
}

// AvfsMountsUnder lists the avfs mounts at or below dir (tests use it to
// check that they leave none behind).
func AvfsMountsUnder(dir string) []string {
	ms, _ := fuseMounts()
	var out []string
	for _, m := range ms {
		if m.FsType == "fuse.avfs" && (m.Dir == dir || strings.HasPrefix(m.Dir, strings.TrimSuffix(dir, "/")+"/")) {
			out = append(out, m.Dir)
		}
	}
	return out
}
