package mountd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Workspaces other than FUSE (an overlay mount: the kernel serves it, and
// the vault sees its writes only when its upper dir is ingested) are
// served by the same kind of process as a FUSE mount, `avfs mount
// --foreground --transport NAME`, for the same reasons: something must
// hold the vault's writer lock and the mount's record for as long as the
// mount lives, answer "flush" on the control socket (Persist) so readers
// of the vault see the host's writes, answer a proxy run's ops in the
// vault right after a Persist (WorkspaceOptions.Control), and end the
// workspace when asked ("unmount"; "release" for one that lingers), once
// idle for its timeout, on a signal, or when its owner exits.

// Ender is a workspace whose serving process can end it on request: it
// makes the vault hold its writes (or, with discard, throws them away)
// and unmounts. Unless lazy, a mount in use fails with an error wrapping
// EBUSY and stays, as does one whose ingest the vault refuses.
type Ender interface {
	End(ctx context.Context, lazy, discard bool) error
}

// unmountArgs are the arguments of the control op "unmount".
type unmountArgs struct {
	Lazy    bool `json:"lazy,omitempty"`
	Discard bool `json:"discard,omitempty"`
}

// WorkspaceOptions say how a served workspace answers and when it ends.
type WorkspaceOptions struct {
	// OwnerPID ends the workspace when that process exits (0: none).
	OwnerPID int
	// Control are ops answered in the vault the workspace writes, right
	// after a Persist, so each sees every write made in it (a proxy
	// run's checkpoint and summary: proxy.ServerOps). Only a workspace
	// that is a PersistWither answers them.
	Control map[string]ControlFunc
	// IdleTimeout, when positive, ends the workspace once it has served
	// no control request for that long and nothing holds it, and makes
	// it give way to a CLI write ("release"), as a FUSE session does
	// (idle.go).
	IdleTimeout time.Duration
	// Log receives the errors of the end.
	Log io.Writer
}

// PersistWither is a workspace that persists and then runs fn on the
// vault it wrote, still holding it (overlaymount's).
type PersistWither interface {
	PersistWith(ctx context.Context, fn func(*vfs.Vault) error) error
}

// UpperSizer is a workspace whose every Persist ingests again all it
// holds (an overlay's upper): entries (files, dirs, whiteouts) and bytes
// as the last Persist found them.
type UpperSizer interface {
	UpperSize() (entries int, bytes int64)
}

// UpperSize is the reply of the control op "upper".
type UpperSize struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Settled: the last persist trusted all it saw (Settler); a Persist
	// now finds nothing to read again.
	Settled bool `json:"settled"`
}

// Settler is a workspace whose last Persist saw writes too recent to
// trust (an overlay's upper: names whose ctime was within a clock tick
// of its walk), which the next Persist reads again. ServeWorkspace
// persists it once more after wait, while no run holds the vault, so
// that the next run's checkpoint does not: a warm git round's set-up
// spent 4–5 ms re-reading git's index there.
type Settler interface {
	Unsettled() (wait time.Duration, ok bool)
}

// Readlinker is a workspace that reads a symlink of its live tree
// itself (an overlay's merged dir), so that a question about the tree
// needs no Persist first.
type Readlinker interface {
	// Readlink is the target of the symlink at vault path p, resolved as
	// the vault resolves it; ok is false when p is not a symlink.
	Readlink(p string) (target string, ok bool, err error)
}

// Link is the reply of the control op "readlink": the symlink's target
// (OK false: the path is not a symlink).
type Link struct {
	Target string `json:"target"`
	OK     bool   `json:"ok"`
}

type readlinkArgs struct {
	Path string `json:"path"`
}

// WorkspaceReadlink asks the server of the workspace at mnt for the
// symlink at vault path p of its live tree (Readlinker); a workspace
// that cannot say gives an InvalidInput error.
func WorkspaceReadlink(h *registry.Home, mnt, p string) (Link, error) {
	var l Link
	err := Call(h, mnt, "readlink", readlinkArgs{Path: p}, &l)
	return l, err
}

// WorkspaceUpper asks the server of the workspace at mnt what its last
// Persist ingested (UpperSizer); a workspace that does not say gives an
// InvalidInput error.
func WorkspaceUpper(h *registry.Home, mnt string) (UpperSize, error) {
	var u UpperSize
	err := Call(h, mnt, "upper", nil, &u)
	return u, err
}

// ServeWorkspace serves ws, started by this process, until it ends: an
// "unmount" on its control socket (only a read-write workspace has one),
// a "release" or the idle timeout (o.IdleTimeout), ctx's end (the
// process's signals) or the exit of process o.OwnerPID. The last two end
// it as Close does. ready hears once that the workspace answers, or why
// the control socket failed. Errors of the end are logged to o.Log and
// returned.
func ServeWorkspace(ctx context.Context, h *registry.Home, ws transport.Workspace, o WorkspaceOptions, ready *Reporter) error {
	in := ws.Info()
	ended := make(chan struct{}, 1)
	signalEnded := func() {
		select {
		case ended <- struct{}{}:
		default: // ended already
		}
	}
	// A workspace serves one request at a time: a flush and an unmount
	// racing on one upper dir would each ingest half of it.
	var mu sync.Mutex
	var activity atomic.Uint64
	end := func(a unmountArgs) error {
		mu.Lock()
		defer mu.Unlock()
		err := endWorkspace(ctx, ws, a)
		if err == nil {
			signalEnded()
		}
		return err
	}
	// settleLater, called with mu held after a persist, has a Settler
	// persisted again once what it saw can be trusted: not counted as
	// activity (the idle end goes by what others ask), and not while a
	// run holds the vault (its own summary persists then).
	var settle *time.Timer
	settleLater := func() {
		s, ok := ws.(Settler)
		if !ok {
			return
		}
		wait, unsettled := s.Unsettled()
		if !unsettled {
			return
		}
		if settle != nil {
			settle.Stop()
		}
		settle = time.AfterFunc(wait, func() {
			unlock, err := lockToLeave(h, in.Vault) // a run arriving meanwhile waits
			if err != nil {
				return
			}
			defer unlock()
			mu.Lock()
			defer mu.Unlock()
			if _, still := s.Unsettled(); !still {
				return
			}
			if err := ws.Persist(ctx); err != nil && o.Log != nil {
				fmt.Fprintf(o.Log, "avfs mount: settling the %s workspace at %s: %v\n", in.Transport, in.Dir, err)
			}
		})
	}
	defer func() {
		mu.Lock()
		if settle != nil {
			settle.Stop()
		}
		mu.Unlock()
	}()
	if !in.ReadOnly {
		plain := map[string]plainFunc{
			"flush": func(json.RawMessage) (any, error) {
				activity.Add(1)
				mu.Lock()
				defer mu.Unlock()
				err := ws.Persist(ctx)
				settleLater()
				return nil, err
			},
			"unmount": func(raw json.RawMessage) (any, error) {
				var a unmountArgs
				if len(raw) > 0 {
					if err := json.Unmarshal(raw, &a); err != nil {
						return nil, errs.New(errs.InvalidInput, "unmount", "bad arguments: %v", err)
					}
				}
				return nil, end(a)
			},
			"release": func(json.RawMessage) (any, error) {
				if o.IdleTimeout <= 0 {
					return nil, &errs.Error{Kind: errs.InvalidInput, Op: "release", Path: in.Dir,
						Err: errors.New("only a mount started with an idle timeout gives way")}
				}
				return nil, end(unmountArgs{})
			},
			"readlink": func(raw json.RawMessage) (any, error) {
				rl, ok := ws.(Readlinker)
				if !ok {
					return nil, errs.New(errs.InvalidInput, "readlink", "the %s transport answers readlink after a persist (proxy.readlink)", in.Transport)
				}
				var a readlinkArgs
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, errs.New(errs.InvalidInput, "readlink", "bad arguments: %v", err)
				}
				activity.Add(1)
				mu.Lock() // not while an end unmounts the tree
				defer mu.Unlock()
				t, ok, err := rl.Readlink(a.Path)
				return Link{Target: t, OK: ok}, err
			},
			"upper": func(json.RawMessage) (any, error) {
				us, ok := ws.(UpperSizer)
				if !ok {
					return nil, errs.New(errs.InvalidInput, "upper", "the %s transport does not re-ingest what it holds", in.Transport)
				}
				mu.Lock()
				defer mu.Unlock()
				n, b := us.UpperSize()
				unsettled := false
				if st, ok := ws.(Settler); ok {
					_, unsettled = st.Unsettled()
				}
				return UpperSize{Entries: n, Bytes: b, Settled: !unsettled}, nil
			},
		}
		var ops map[string]ControlFunc
		var run func(func(*vfs.Vault) error) error
		if pw, ok := ws.(PersistWither); ok && len(o.Control) > 0 {
			ops = o.Control
			run = func(fn func(*vfs.Vault) error) error {
				activity.Add(1)
				mu.Lock()
				defer mu.Unlock()
				err := pw.PersistWith(ctx, fn)
				settleLater()
				return err
			}
		}
		path, err := mountrec.SocketPath(h, in.Dir)
		var cs *controlServer
		if err == nil {
			cs, err = listenControl(path, ops, plain, run)
		}
		if err != nil {
			err = &errs.Error{Kind: MountFailed, Op: "mount", Path: in.Dir, Vault: in.Vault, Err: fmt.Errorf("control socket: %w", err)}
			ready.Fail(err)
			_ = ws.Close(context.Background())
			return err
		}
		defer cs.close()
	}
	ready.Ready()
	var ownerGone <-chan struct{}
	if o.OwnerPID > 0 {
		ownerGone = WatchOwner(o.OwnerPID)
	}
	if o.IdleTimeout > 0 && !in.ReadOnly {
		stop := make(chan struct{})
		defer close(stop)
		go whenIdle(o.IdleTimeout, stop, activity.Load, func() error {
			unlock, err := lockToLeave(h, in.Vault)
			if err != nil {
				return err
			}
			defer unlock() // once the end has let go of the record and the writer lock
			return end(unmountArgs{})
		})
	}
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
	case <-ownerGone:
	}
	// The end must run to completion even though ctx, the signals', is
	// over: it is what makes the vault hold the host's writes.
	mu.Lock()
	err := ws.Close(context.Background())
	mu.Unlock()
	if err != nil && o.Log != nil {
		fmt.Fprintf(o.Log, "avfs mount: ending the %s workspace at %s: %v\n", in.Transport, in.Dir, err)
	}
	return err
}

// endWorkspace ends ws as an unmount asks: EBUSY becomes MountBusy.
func endWorkspace(ctx context.Context, ws transport.Workspace, a unmountArgs) error {
	e, ok := ws.(Ender)
	if !ok {
		if a.Discard {
			return errs.New(errs.InvalidInput, "unmount", "the %s transport cannot discard its writes", ws.Info().Transport)
		}
		return ws.Close(ctx)
	}
	err := e.End(ctx, a.Lazy, a.Discard)
	if errors.Is(err, syscall.EBUSY) {
		return &errs.Error{Kind: MountBusy, Op: "unmount", Path: ws.Info().Dir, Err: err,
			Hint: "close the files in use, or pass --lazy"}
	}
	return err
}
