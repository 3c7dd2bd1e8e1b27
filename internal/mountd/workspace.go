package mountd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
)

// Workspaces other than FUSE (an overlay mount: the kernel serves it, and
// the vault sees its writes only when its upper dir is ingested) are
// served by the same kind of process as a FUSE mount, `avfs mount
// --foreground --transport NAME`, for the same reasons: something must
// hold the vault's writer lock and the mount's record for as long as the
// mount lives, answer "flush" on the control socket (Persist) so readers
// of the vault see the host's writes, and end the workspace when asked
// ("unmount"), on a signal, or when its owner exits.

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

// ServeWorkspace serves ws, started by this process, until it ends: an
// "unmount" on its control socket (only a read-write workspace has one),
// ctx's end (the process's signals) or the exit of process ownerPID
// (0: none). The last two end it as Close does. ready hears once that
// the workspace answers, or why the control socket failed. Errors of
// the end are logged to log and returned.
func ServeWorkspace(ctx context.Context, h *registry.Home, ws transport.Workspace, ownerPID int, ready *Reporter, log io.Writer) error {
	in := ws.Info()
	ended := make(chan struct{}, 1)
	// A workspace serves one request at a time: a flush and an unmount
	// racing on one upper dir would each ingest half of it.
	var mu sync.Mutex
	if !in.ReadOnly {
		path, err := mountrec.SocketPath(h, in.Dir)
		var cs *controlServer
		if err == nil {
			cs, err = listenControl(path, nil, map[string]plainFunc{
				"flush": func(json.RawMessage) (any, error) {
					mu.Lock()
					defer mu.Unlock()
					return nil, ws.Persist(ctx)
				},
				"unmount": func(raw json.RawMessage) (any, error) {
					var a unmountArgs
					if len(raw) > 0 {
						if err := json.Unmarshal(raw, &a); err != nil {
							return nil, errs.New(errs.InvalidInput, "unmount", "bad arguments: %v", err)
						}
					}
					mu.Lock()
					defer mu.Unlock()
					err := endWorkspace(ctx, ws, a)
					if err == nil {
						select {
						case ended <- struct{}{}:
						default: // ended already
						}
					}
					return nil, err
				},
			}, nil)
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
	if ownerPID > 0 {
		ownerGone = WatchOwner(ownerPID)
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
	if err != nil && log != nil {
		fmt.Fprintf(log, "avfs mount: ending the %s workspace at %s: %v\n", in.Transport, in.Dir, err)
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
