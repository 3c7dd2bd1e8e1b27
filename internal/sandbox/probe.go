package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// probeFile caches the outcome of the last probe in the runtime dir: a
// probe is a bubblewrap run (about 4 ms), and it answers the same until
// the machine reboots or bubblewrap changes.
const probeFile = "isolation-probe"

// ProbeFile is the name of the cached probe in a runtime dir.
const ProbeFile = probeFile

// Bwrap is the bubblewrap program a run uses: $AVFS_BWRAP when set (a
// path; a missing one makes isolation unavailable), else bwrap on PATH.
func Bwrap(getenv func(string) string) (string, error) {
	if p := getenv("AVFS_BWRAP"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", unavailable("AVFS_BWRAP=%s: %v", p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", unavailable("bubblewrap (bwrap) is not on PATH")
	}
	return p, nil
}

// Probe reports whether bwrap can make the namespaces a run needs here:
// nil, or an Unavailable error with the kernel's or bubblewrap's answer.
// The answer is cached in cacheDir (the runtime dir; "" caches nothing).
func Probe(bwrap, cacheDir string) error {
	key := probeKey(bwrap)
	cache := ""
	if cacheDir != "" && key != "" {
		cache = filepath.Join(cacheDir, probeFile)
		if b, err := os.ReadFile(cache); err == nil {
			k, verdict, _ := strings.Cut(string(b), "\n")
			if k == key {
				if verdict == "ok" {
					return nil
				}
				return unavailable("%s", strings.TrimPrefix(verdict, "no: "))
			}
		}
	}
	err := probe(bwrap)
	if cache != "" {
		verdict := "ok"
		if err != nil {
			verdict = "no: " + why(err)
		}
		tmp := fmt.Sprintf("%s.%d", cache, os.Getpid())
		if os.WriteFile(tmp, []byte(key+"\n"+verdict), 0o600) == nil {
			_ = os.Rename(tmp, cache)
		}
	}
	return err
}

// probe runs true in the namespaces a run uses.
func probe(bwrap string) error {
	cmd := exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
		"--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--", "true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return unavailable("bubblewrap cannot make the namespaces here: %s", msg)
	}
	return nil
}

// probeKey names what the probe's answer depends on: the boot, the
// bubblewrap binary and the user. "" when it cannot be known.
func probeKey(bwrap string) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	fi, err := os.Stat(bwrap)
	if err != nil {
		return ""
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	ino := uint64(0)
	if st != nil {
		ino = st.Ino
	}
	return fmt.Sprintf("v1 boot=%s bwrap=%s size=%d mtime=%d ino=%d uid=%d",
		strings.TrimSpace(string(boot)), bwrap, fi.Size(), fi.ModTime().UnixNano(), ino, os.Geteuid())
}

// why is an error's cause without its operation and hint.
func why(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Err != nil {
		return e.Err.Error()
	}
	return err.Error()
}
