// Package fusemount is the FUSE transport: the vault served live as a
// directory by its own avfs process (go-fuse documents deadlocks when one
// process both serves a mount and uses it). Every write is the vault's as
// soon as the server persists it, so the host sees the workspace live.
package fusemount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mount"
	"github.com/agentvfs/agentvfs/internal/transport"
)

// Name is the FUSE transport's name.
const Name = mount.TransportName

// ServeFunc starts the serving process of spec and returns its pid once
// the mount answers.
type ServeFunc func(ctx context.Context, spec transport.Spec) (pid int, err error)

// Transport serves workspaces over FUSE.
type Transport struct{ serve ServeFunc }

var _ transport.Transport = (*Transport)(nil)

// New is the FUSE transport whose servers serve starts.
func New(serve ServeFunc) *Transport { return &Transport{serve: serve} }

// Name is "fuse".
func (*Transport) Name() string { return Name }

// Start mounts spec.Vault at spec.Dir. It fails with FuseUnavailable on a
// host without FUSE, and as ServeFunc fails otherwise.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Workspace, error) {
	if err := mount.Available(); err != nil {
		return nil, err
	}
	pid, err := t.serve(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &workspace{spec: spec, pid: pid}, nil
}

// workspace is one FUSE mount this process started.
type workspace struct {
	spec transport.Spec
	pid  int
}

func (w *workspace) Dir() string { return w.spec.Dir }

func (w *workspace) Info() transport.Info {
	return transport.Info{Transport: Name, Vault: w.spec.Vault, Dir: w.spec.Dir, PID: w.pid, ReadOnly: w.spec.ReadOnly}
}

// Persist fsyncs the mount's root, which persists everything the server
// buffers (docs/architecture.md, Mount).
func (w *workspace) Persist(ctx context.Context) error {
	f, err := os.Open(w.spec.Dir)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "persist", Path: w.spec.Dir, Vault: w.spec.Vault, Err: err}
	}
	return nil
}

// Close unmounts, detaching a mount still held, and waits until the
// server has closed the vault.
func (w *workspace) Close(ctx context.Context) error {
	mnt := w.spec.Dir
	err := mount.Unmount(mnt, false)
	if errors.Is(err, syscall.EBUSY) {
		err = mount.Unmount(mnt, true)
	}
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy unmount", Path: mnt, Err: err}
	}
	if !mount.WaitGone(w.spec.Home, mnt, 30*time.Second) {
		return &errs.Error{Kind: errs.IoError, Op: "proxy unmount", Path: mnt, Err: fmt.Errorf("the mount's server did not finish")}
	}
	return nil
}
