package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// RuntimeDir is where the proxy's mounts of one avfs home live: a per-user
// runtime directory outside $AVFS_HOME, so that no path from inside a
// workspace (.., symlinks, /proc/self/cwd) leads to the vaults, the
// policy, the approvals or the run records. It is
//
//	$XDG_RUNTIME_DIR/avfs/<home>   when XDG_RUNTIME_DIR is set and the user's
//	/run/avfs-0/<home>             for root (where /run exists)
//	$TMPDIR/avfs-$UID/<home>       for anyone else
//
// where <home> is a hash of the home's path, so two homes never share a
// mountpoint. The user's directory is created 0700 and refused (IoError)
// when it is a symlink, another user's, or open to others: a mountpoint
// someone else can swap is a path into their tree.
func RuntimeDir(home, xdgRuntimeDir string) (string, error) {
	uid := os.Geteuid()
	base, dir := runtimePaths(home, xdgRuntimeDir, uid)
	if err := privateDir(base, uid); err != nil {
		return "", err
	}
	_, statErr := os.Lstat(dir)
	if err := privateDir(dir, uid); err != nil {
		return "", err
	}
	if os.IsNotExist(statErr) {
		// A new home: say whose dir this is, and take away the dirs of
		// homes that are gone.
		_ = os.WriteFile(filepath.Join(dir, homeFile), []byte(filepath.Clean(home)), 0o600)
		prune(base, dir)
	}
	return dir, nil
}

// FoundRuntimeDir is RuntimeDir when it was made already, without making
// or checking it: what a command that only looks (for the runs a crash
// left in its layer cache) asks, so that it creates nothing.
func FoundRuntimeDir(home, xdgRuntimeDir string) (string, bool) {
	_, dir := runtimePaths(home, xdgRuntimeDir, os.Geteuid())
	fi, err := os.Lstat(dir)
	return dir, err == nil && fi.IsDir()
}

func runtimePaths(home, xdgRuntimeDir string, uid int) (base, dir string) {
	if xdgRuntimeDir != "" && filepath.IsAbs(xdgRuntimeDir) && ownedBy(xdgRuntimeDir, uid) {
		base = filepath.Join(xdgRuntimeDir, "avfs")
	} else if fi, err := os.Stat("/run"); uid == 0 && err == nil && fi.IsDir() {
		base = "/run/avfs-0"
	} else {
		base = filepath.Join(os.TempDir(), "avfs-"+strconv.Itoa(uid))
	}
	sum := sha256.Sum256([]byte(filepath.Clean(home)))
	return base, filepath.Join(base, hex.EncodeToString(sum[:8]))
}

// homeFile names the home a runtime dir belongs to. Its mtime is when
// the dir was made: prune never rewrites it.
const homeFile = "home"

// pruneGrace is how long prune leaves a runtime dir whose home does not
// exist: a process may ask for its home's runtime dir before it makes the
// home (a temp home, made right after). That takes milliseconds; a minute
// is far beyond it on a loaded host, and short enough that a gone home's
// cache goes with the next home made after it.
const pruneGrace = time.Minute

// prune removes the runtime dirs under base, other than keep, whose home
// no longer exists and whose home file is older than pruneGrace: their
// empty mountpoints, their own files and their layer cache's entries and
// data (overlay.Cache.Clear), then the dir once nothing else is left. A
// mount still in one (a server that outlived its home) keeps it and the
// entries it holds; so does a run's dir with a pending.json, which may
// hold writes a crash left for the vault's next open to ingest: a home
// that looks gone may be on a filesystem not mounted now.
func prune(base, keep string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		dir := filepath.Join(base, e.Name())
		if !e.IsDir() || dir == keep {
			continue
		}
		hf := filepath.Join(dir, homeFile)
		fi, err := os.Stat(hf)
		if err != nil || time.Since(fi.ModTime()) < pruneGrace {
			continue
		}
		home, err := os.ReadFile(hf)
		if err != nil {
			continue
		}
		if _, err := os.Stat(string(home)); !os.IsNotExist(err) {
			continue
		}
		mnts, _ := os.ReadDir(filepath.Join(dir, "mnt"))
		for _, m := range mnts {
			_ = os.Remove(filepath.Join(dir, "mnt", m.Name())) // fails on a mountpoint in use, as it should
		}
		_ = os.Remove(filepath.Join(dir, "mnt"))
		_ = os.Remove(filepath.Join(dir, sandbox.ProbeFile))
		clearLayers(dir)
		if left, err := os.ReadDir(dir); err != nil || len(left) != 1 {
			continue // not empty: the home file keeps saying whose it is
		}
		if os.Remove(hf) == nil && os.Remove(dir) != nil {
			// Something came in meanwhile: keep knowing whose, and since when.
			_ = os.WriteFile(hf, home, 0o600)
			_ = os.Chtimes(hf, fi.ModTime(), fi.ModTime())
		}
	}
}

// privateDir makes dir (mode 0700) if it is missing and checks that it is
// a real directory of uid that nobody else can enter.
func privateDir(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return &errs.Error{Kind: errs.IoError, Op: "proxy runtime dir", Path: dir, Err: err}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy runtime dir", Path: dir, Err: err}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		err = fmt.Errorf("not a directory (a symlink or a file is refused)")
	case !ok || int(st.Uid) != uid:
		err = fmt.Errorf("owned by uid %d, not by this user (uid %d)", st.Uid, uid)
	case fi.Mode().Perm() != 0o700:
		err = fmt.Errorf("mode %04o, not 0700", fi.Mode().Perm())
	}
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy runtime dir", Path: dir, Err: err,
			Hint: "remove it, or set XDG_RUNTIME_DIR to a directory of yours"}
	}
	return nil
}

func ownedBy(dir string, uid int) bool {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
