package mountrec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// Info is the record of one mount, as `avfs mounts` lists it.
type Info struct {
	Vault      string    `json:"vault"`
	Mountpoint string    `json:"mountpoint"`
	PID        int       `json:"pid"`
	ReadOnly   bool      `json:"readonly"`
	StartedAt  time.Time `json:"started_at"`
	// IdleTimeoutMS is how long the mount may go unused before it ends
	// (0: it lasts until unmounted). Such a mount gives way to a CLI
	// write or another read-write mount of the vault when idle.
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	// Transport names the transport that serves the mount (package
	// transport); a record written before transports were named is
	// FUSE's.
	Transport string `json:"transport"`
	// Live is false when the serving process is gone (the record is
	// stale: `avfs mounts --prune` removes it).
	Live bool `json:"live"`
}

// FUSE is the transport name of FUSE mounts, and of the records written
// before transports were named.
const FUSE = "fuse"

// recordKey names the files of the mount at mountpoint.
func recordKey(mountpoint string) string {
	sum := sha256.Sum256([]byte(mountpoint))
	return hex.EncodeToString(sum[:8])
}

// SocketPath is where the server of the mount at mountpoint answers its
// control socket (package mountd).
func SocketPath(h *registry.Home, mountpoint string) (string, error) {
	dir, err := dirOf(h)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, recordKey(mountpoint)+".sock"), nil
}

// LogPath is where the serving process of a mount at mountpoint writes
// its output.
func LogPath(h *registry.Home, mountpoint string) (string, error) {
	dir, err := dirOf(h)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, recordKey(mountpoint)+".log"), nil
}

// Record is the held record of a live mount.
type Record struct {
	once sync.Once
	path string
	f    *os.File
}

// Create writes the record of a mount and holds its lock. A record
// of a live mount at the same place is AlreadyExists; a stale one is
// replaced.
func Create(h *registry.Home, info Info) (*Record, error) {
	dir, err := dirOf(h)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, recordKey(info.Mountpoint)+".json")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Path: path, Err: err}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, &errs.Error{Kind: errs.AlreadyExists, Op: "mount", Path: info.Mountpoint,
			Err: errors.New("an avfs mount is already served at this directory")}
	}
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Path: path, Err: err}
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		f.Close()
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Path: path, Err: err}
	}
	return &Record{path: path, f: f}, nil
}

// Remove deletes the record while still holding its lock, then lets go.
func (r *Record) Remove() {
	r.once.Do(func() {
		_ = os.Remove(r.path)
		_ = syscall.Flock(int(r.f.Fd()), syscall.LOCK_UN) // a forked child's copy must not keep it
		r.f.Close()
	})
}

// List returns the mount records of the home, sorted by mountpoint, with
// Live set for those whose server still runs.
func List(h *registry.Home) ([]Info, error) {
	dir, err := dirOf(h)
	if err != nil {
		return nil, err
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	out := []Info{}
	for _, p := range paths {
		info, ok := readRecord(p)
		if ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Mountpoint, b.Mountpoint) })
	return out, nil
}

// readRecord reads one record and whether its server holds it.
func readRecord(path string) (Info, bool) {
	var info Info
	f, err := os.Open(path)
	if err != nil {
		return info, false
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(&info); err != nil || info.Mountpoint == "" {
		// A record being written, or torn by a crash: live if locked.
		info.Mountpoint = ""
	}
	if info.Transport == "" {
		info.Transport = FUSE
	}
	info.Live = errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	if !info.Live {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return info, info.Mountpoint != ""
}

// Find returns the record of the mount at mountpoint.
func Find(h *registry.Home, mountpoint string) (Info, bool) {
	dir, err := dirOf(h)
	if err != nil {
		return Info{}, false
	}
	return readRecord(filepath.Join(dir, recordKey(mountpoint)+".json"))
}

// WaitGone waits until the server of the mount at mountpoint has released
// its record (it has closed the vault and is exiting), for at most timeout.
func WaitGone(h *registry.Home, mountpoint string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		info, ok := Find(h, mountpoint)
		if !ok || !info.Live {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Prune removes the records of mounts whose server died, detaching their
// mounts when the kernel still has them (a dead server leaves a mount
// that answers ENOTCONN). It returns what it removed.
func Prune(h *registry.Home) ([]Info, error) {
	infos, err := List(h)
	if err != nil {
		return nil, err
	}
	dir, _ := dirOf(h)
	pruned := []Info{}
	for _, info := range infos {
		if info.Live {
			continue
		}
		if IsAvfsMount(info.Mountpoint) {
			_ = Unmount(info.Mountpoint, true)
		} else if info.Transport != FUSE && IsMountpoint(info.Mountpoint) {
			// An overlay whose server was killed: the kernel serves it
			// still. Its upper dir waits in the layer cache for the next
			// overlay mount of the vault to ingest it.
			_ = Unmount(info.Mountpoint, true)
		}
		p := filepath.Join(dir, recordKey(info.Mountpoint)+".json")
		// Only remove it if still stale: a new server may have taken it.
		if again, ok := readRecord(p); ok && !again.Live {
			_ = os.Remove(p)
			_ = os.Remove(strings.TrimSuffix(p, ".json") + ".log")
		}
		pruned = append(pruned, info)
	}
	return pruned, nil
}
