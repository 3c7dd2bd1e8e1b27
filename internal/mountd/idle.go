package mountd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// Idle mounts. A mount started with an idle timeout is a cache of warm
// state: the proxy leaves its mounts so, and the next run on the vault
// starts in a few milliseconds instead of mounting again. Such a mount
// ends by itself once it has served nothing for the timeout, and gives
// way at once to a CLI write or another read-write mount of the vault
// (CheckWriter). It never ends under its users: whoever ends it holds
// the vault's run lock (package mountrec), which a proxy run holds for its
// length, and the unmount is a plain one, which the kernel refuses while
// a file in the mount is open or a process works in it.

// endWhenIdle ends the mount once it has served no request for the
// idle timeout and nothing holds it; a mount in use stays and is looked
// at again a timeout later.
func (s *Session) endWhenIdle() {
	whenIdle(s.opts.IdleTimeout, s.done, s.fs.Activity, s.leave)
}

// whenIdle calls leave once activity has not moved for d, until done is
// closed or leave returns nil; a leave that fails (a run holds the
// vault, files in the mount are in use) is tried again d later. FUSE
// sessions and served workspaces (ServeWorkspace) share it.
func whenIdle(d time.Duration, done <-chan struct{}, activity func() uint64, leave func() error) {
	tick := time.NewTicker(max(d/4, 10*time.Millisecond))
	defer tick.Stop()
	seen, since := activity(), time.Now()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		if n := activity(); n != seen {
			seen, since = n, time.Now()
			continue
		}
		if time.Since(since) < d {
			continue
		}
		if leave() == nil {
			return
		}
		since = time.Now()
	}
}

// lockToLeave takes vault's run lock for a server about to end its idle
// mount (or to settle it): held until the mount is released, a run
// arriving meanwhile waits and then mounts anew. A home that is gone
// (moved away, its filesystem unmounted) has no runs to keep out, and
// the server, which holds its vault open, goes on without the lock
// rather than make a skeleton home where the real one was.
func lockToLeave(h *registry.Home, vault string) (func(), error) {
	unlock, err := mountrec.LockRuns(h, vault, fmt.Sprintf("%s (pid %d)", mountrec.LeavingHolder, os.Getpid()))
	if errors.Is(err, mountrec.ErrHomeGone) {
		return func() {}, nil
	}
	return unlock, err
}

// leave ends the mount if no run holds it and nothing in it is in use.
// It keeps the run lock until the release is done, so a run arriving
// meanwhile waits and then mounts anew.
func (s *Session) leave() error {
	unlock, err := lockToLeave(s.opts.Home, s.opts.Vault)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.leaving = unlock
	s.mu.Unlock()
	if err := s.beginUnmount(false); err != nil {
		s.mu.Lock()
		s.leaving = nil
		s.mu.Unlock()
		unlock()
		return err
	}
	return nil
}

// releaseOp is the control op "release": a client that holds the vault's
// run lock asks an idle-timeout mount to end now. It answers once the
// kernel has let go of the mount; the client then waits for the server
// to be gone.
func (s *Session) releaseOp() error {
	if s.opts.IdleTimeout <= 0 {
		return &errs.Error{Kind: errs.InvalidInput, Op: "release", Path: s.opts.Mountpoint,
			Err: errors.New("only a mount started with an idle timeout gives way")}
	}
	return s.beginUnmount(false)
}

// reclaim ends the idle-timeout mount of vault at mnt so that this
// process may write to the vault. It fails when the mount has no idle
// timeout, a proxy run uses it, or files in it are in use.
func reclaim(h *registry.Home, vault, mnt string) error {
	info, ok := mountrec.Find(h, mnt)
	if !ok || !info.Live || info.IdleTimeoutMS <= 0 {
		return errors.New("it was mounted without an idle timeout")
	}
	unlock, err := mountrec.LockRuns(h, vault, fmt.Sprintf("%s (ended by pid %d for a write)", mountrec.LeavingHolder, os.Getpid()))
	if err != nil {
		return err
	}
	defer unlock()
	if _, live := mountrec.Writer(h, vault); !live {
		return nil // it ended by itself while the lock was waited for
	}
	return release(context.Background(), h, info)
}

// EndIdle ends the idle-timeout mounts of vault, for a caller that holds
// the vault's run lock and is about to write to it (a proxy undo). A
// mount without an idle timeout is left alone. When ctx ends while a
// server is waited for, it returns Interrupted; that server finishes by
// itself.
func EndIdle(ctx context.Context, h *registry.Home, vault string) error {
	infos, err := mountrec.List(h)
	if err != nil {
		return err
	}
	for _, in := range infos {
		if in.Vault == vault && in.Live && in.IdleTimeoutMS > 0 {
			if err := release(ctx, h, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// release asks the server of an idle-timeout mount to end it and waits
// until the server is gone.
func release(ctx context.Context, h *registry.Home, info mountrec.Info) error {
	if err := Call(h, info.Mountpoint, "release", nil, nil); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !mountrec.WaitGone(h, info.Mountpoint, 50*time.Millisecond) {
		if ctx.Err() != nil {
			return errs.Stopped(ctx, "release")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its server (pid %d) did not finish", info.PID)
		}
	}
	return nil
}
