//go:build linux

package overlay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// A probe mounts and unmounts an overlay (a few milliseconds; in a user
// namespace it also starts a helper process), and its answer is the same
// for every run until something it depends on changes: the kernel, the
// boot (modules, sysctls), the user, the format and the filesystem the
// cache lives on. CachedProbe keeps the answer in a file of the cache
// dir, keyed by those; a file whose key differs, or that cannot be read
// or parsed, is probed again and rewritten.

// probeFilePrefix names a cached verdict in the cache dir:
// .verdict-<format> (a file; Entries lists only dirs).
const probeFilePrefix = ".verdict-"

// CachedProbe is probe's answer for format f, cached in dir (the layer
// cache's root, created if missing).
func CachedProbe(dir string, f Format, probe func() error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "overlay", Path: dir, Err: err}
	}
	key := probeKey(dir, f)
	file := filepath.Join(dir, probeFilePrefix+string(f))
	if key != "" {
		if b, err := os.ReadFile(file); err == nil {
			k, verdict, ok := strings.Cut(string(b), "\n")
			switch {
			case !ok || k != key:
			case verdict == "ok":
				return nil
			case strings.HasPrefix(verdict, "no: ") && len(verdict) > 4:
				return &errs.Error{Kind: errs.IoError, Op: "overlay probe", Path: dir, Err: fmt.Errorf("%s", verdict[4:])}
			}
		}
	}
	err := probe()
	if key != "" {
		verdict := "ok"
		if err != nil {
			verdict = "no: " + cause(err)
		}
		tmp := fmt.Sprintf("%s.%d", file, os.Getpid())
		if os.WriteFile(tmp, []byte(key+"\n"+verdict), 0o600) == nil {
			_ = os.Rename(tmp, file)
		}
	}
	return err
}

// ForgetProbe drops the cached verdict of format f in dir: a mount failed
// that the verdict said would work.
func ForgetProbe(dir string, f Format) { _ = os.Remove(filepath.Join(dir, probeFilePrefix+string(f))) }

// probeKey names what a probe's answer depends on; "" when it cannot be
// known (then nothing is cached).
func probeKey(dir string, f Format) string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	var st unix.Statfs_t
	var ds unix.Stat_t
	if unix.Statfs(dir, &st) != nil || unix.Stat(dir, &ds) != nil {
		return ""
	}
	// Sysctls that turn unprivileged user namespaces off (the second is
	// Debian's and Ubuntu's own); absent ones read as "".
	userns, _ := os.ReadFile("/proc/sys/user/max_user_namespaces")
	clone, _ := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone")
	return fmt.Sprintf("v1 kernel=%s boot=%s euid=%d format=%s fs=%x dev=%d userns=%s,%s",
		unix.ByteSliceToString(u.Release[:]), strings.TrimSpace(string(boot)), os.Geteuid(), f,
		st.Type, ds.Dev, strings.TrimSpace(string(userns)), strings.TrimSpace(string(clone)))
}

// cause is an error's message without its operation and hint.
func cause(err error) string {
	if e, ok := err.(*errs.Error); ok && e.Err != nil {
		return e.Err.Error()
	}
	return err.Error()
}
