package mountrec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// The run lock of a vault, $AVFS_HOME/proxy/locks/<vault>.lock, is held
// by whoever uses the vault's mount for a while: a proxy run for its
// length, and whoever ends an idle mount (the server itself, or a CLI
// write that needs the vault) until the server is gone. So a run never
// loses its mount half way, and a mount never ends under a run.
//
// The file holds its holder, for the error the next comer gets.

// LeavingHolder starts the holder line of a server ending its mount.
const LeavingHolder = "mount server leaving"

// leaveWait bounds how long LockRuns waits for a leaving server.
const leaveWait = 10 * time.Second

func runLockPath(h *registry.Home, vault string) string {
	return filepath.Join(h.Dir, "proxy", "locks", vault+".lock")
}

// ErrHomeGone is why LockRuns fails when the home itself is gone (moved
// away, its filesystem unmounted): a lingering server outlives its home
// that way, and making the lock's dir would leave a skeleton home where
// the real one was, in the way of its coming back.
var ErrHomeGone = errors.New("the avfs home is gone")

// LockRuns takes vault's run lock for holder, or fails at once with
// VaultLocked naming who has it; a server that is ending its mount is
// waited for (it is gone in milliseconds). unlock lets it go. It makes
// the lock's dir under the home, never the home itself (ErrHomeGone).
func LockRuns(h *registry.Home, vault, holder string) (unlock func(), err error) {
	path := runLockPath(h, vault)
	if err := mkdirUnder(h.Dir, filepath.Dir(path)); err != nil {
		kind := errs.IoError
		if errors.Is(err, ErrHomeGone) {
			kind = errs.NotFound
		}
		return nil, &errs.Error{Kind: kind, Op: "lock", Vault: vault, Path: h.Dir, Err: err}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "lock", Vault: vault, Err: err}
	}
	deadline := time.Now().Add(leaveWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			break
		}
		b, _ := os.ReadFile(path)
		by := strings.TrimSpace(string(b))
		if !strings.HasPrefix(by, LeavingHolder) || time.Now().After(deadline) {
			f.Close()
			return nil, &errs.Error{Kind: errs.VaultLocked, Op: "lock", Vault: vault,
				Err:   fmt.Errorf("vault %q is in use (%s)", vault, by),
				Hint:  "wait for it to finish, or work on a fork (`avfs vault fork`)",
				Extra: map[string]any{"holder": by}}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		return nil, &errs.Error{Kind: errs.IoError, Op: "lock", Vault: vault, Err: err}
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(holder+"\n"), 0)
	var once sync.Once
	return func() {
		once.Do(func() {
			// Unlock explicitly: a child forked meanwhile (by any
			// goroutine) holds the same open file until it execs, and
			// Close alone would leave the lock to that copy.
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		})
	}, nil
}

// mkdirUnder makes dir and its parents below home, which must exist.
func mkdirUnder(home, dir string) error {
	rel, err := filepath.Rel(home, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is not under %s", dir, home)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return ErrHomeGone
	}
	at := home
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		at = filepath.Join(at, part)
		if err := os.Mkdir(at, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			if errors.Is(err, fs.ErrNotExist) {
				return ErrHomeGone // it went since the Stat
			}
			return err
		}
	}
	return nil
}
