package mountd

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// UnmountOptions say how Unmount treats a mount in use.
type UnmountOptions struct {
	// Lazy detaches the mount at once, even while files in it are in use
	// (MNT_DETACH), and does not wait: its server finishes when the last
	// of them is closed.
	Lazy bool
	// DetachBusy detaches a mount whose files are in use instead of
	// failing with MountBusy, and still waits for its server (a proxy
	// run's mount held by a process that left the command's group).
	DetachBusy bool
	// Discard throws away what an overlay mount wrote that its vault
	// does not hold yet, and gives the vault back its state from the
	// start of the mount (a FUSE mount's writes are the vault's already:
	// InvalidInput).
	Discard bool
}

// finishTimeout bounds the wait for an unmounted mount's server to
// persist everything, close the vault and exit.
const finishTimeout = 30 * time.Second

// Unmount ends the avfs mount at mnt (absolute, symlinks resolved) and,
// unless o.Lazy, waits until its server has persisted every write,
// closed the vault and gone. It is the one unmount of the CLI, the proxy
// and the library. It returns the mount's record as it was. It fails
// with NotMounted when mnt holds no avfs mount (pruning the record of a
// dead server), MountBusy when files in it are in use (unless o says to
// detach), and Interrupted when ctx ends during the wait (the server
// finishes by itself).
func Unmount(ctx context.Context, h *registry.Home, mnt string, o UnmountOptions) (mountrec.Info, error) {
	info, hasRecord := mountrec.Find(h, mnt)
	if hasRecord && info.Live && info.Transport != mountrec.FUSE {
		return info, unmountWorkspace(ctx, h, info, o)
	}
	if !mountrec.IsAvfsMount(mnt) {
		if hasRecord && !info.Live {
			_, _ = mountrec.Prune(h)
		}
		return info, &errs.Error{Kind: NotMounted, Op: "unmount", Path: mnt,
			Err: errors.New("no avfs mount at this directory")}
	}
	if o.Discard {
		return info, &errs.Error{Kind: errs.InvalidInput, Op: "unmount", Path: mnt,
			Err: errors.New("--discard applies to overlay mounts: a FUSE mount's writes are in the vault already")}
	}
	if ctx.Err() != nil {
		return info, errs.Stopped(ctx, "unmount")
	}
	err := unmount(mnt, o.Lazy)
	if errs.Is(err, MountBusy) && o.DetachBusy {
		err = unmount(mnt, true)
	}
	if err != nil {
		return info, err
	}
	if o.Lazy {
		return info, nil
	}
	deadline := time.Now().Add(finishTimeout)
	for !mountrec.WaitGone(h, mnt, 50*time.Millisecond) {
		if ctx.Err() != nil {
			return info, errs.Stopped(ctx, "unmount")
		}
		if time.Now().After(deadline) {
			return info, &errs.Error{Kind: errs.IoError, Op: "unmount", Path: mnt,
				Err: fmt.Errorf("the serving process (pid %d) did not finish", info.PID)}
		}
	}
	return info, nil
}

// unmountWorkspace asks the serving process of a workspace that is not
// FUSE to end it ("unmount" on its control socket: the ingest, then the
// unmount) and waits until the process has let go of the record. An
// ingest the vault refuses, or a mount in use, is the error, and the
// mount stays. A read-only workspace has no control socket: its process
// gets SIGTERM, on which it unmounts.
func unmountWorkspace(ctx context.Context, h *registry.Home, info mountrec.Info, o UnmountOptions) error {
	if ctx.Err() != nil {
		return errs.Stopped(ctx, "unmount")
	}
	if info.ReadOnly {
		if err := syscall.Kill(info.PID, syscall.SIGTERM); err != nil {
			return &errs.Error{Kind: errs.IoError, Op: "unmount", Path: info.Mountpoint,
				Err: fmt.Errorf("signalling the serving process (pid %d): %w", info.PID, err)}
		}
	} else {
		a := unmountArgs{Lazy: o.Lazy || o.DetachBusy, Discard: o.Discard}
		err := Call(h, info.Mountpoint, "unmount", a, nil)
		if errors.Is(err, ErrNoControl) {
			return &errs.Error{Kind: errs.IoError, Op: "unmount", Path: info.Mountpoint,
				Err: fmt.Errorf("the serving process (pid %d) does not answer: %w", info.PID, err)}
		}
		if err != nil {
			return err
		}
	}
	deadline := time.Now().Add(finishTimeout)
	for !mountrec.WaitGone(h, info.Mountpoint, 50*time.Millisecond) {
		if ctx.Err() != nil {
			return errs.Stopped(ctx, "unmount")
		}
		if time.Now().After(deadline) {
			return &errs.Error{Kind: errs.IoError, Op: "unmount", Path: info.Mountpoint,
				Err: fmt.Errorf("the serving process (pid %d) did not finish", info.PID)}
		}
	}
	return nil
}

// unmount unmounts dir: EBUSY becomes MountBusy, EINVAL (not a mount
// point) NotMounted.
func unmount(dir string, lazy bool) error {
	err := mountrec.Unmount(dir, lazy)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EBUSY):
		return &errs.Error{Kind: MountBusy, Op: "unmount", Path: dir, Err: err,
			Hint: "close the files in use, or pass --lazy"}
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOENT):
		return &errs.Error{Kind: NotMounted, Op: "unmount", Path: dir, Err: errors.New("no mount at this directory")}
	}
	return &errs.Error{Kind: errs.IoError, Op: "unmount", Path: dir, Err: err}
}

// Stop ends a served session on a signal or when its owner is gone: a
// clean unmount if nothing holds it, else a detach, so the server never
// stays behind.
func (s *Session) Stop() error {
	err := s.Unmount(false)
	if errs.Is(err, MountBusy) {
		err = s.Unmount(true)
	}
	return err
}
