// Package fusemount is the FUSE transport: the vault served live as a
// directory by its own avfs process (package mountd; go-fuse documents
// deadlocks when one process both serves a mount and uses it). Every
// write is the vault's as soon as the server persists it, so the host
// sees the workspace live.
package fusemount

import (
	"context"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/transport"
)

// Name is the FUSE transport's name.
const Name = mountrec.FUSE

// Transport serves workspaces over FUSE.
type Transport struct {
	// exe finds the avfs program that serves a mount
	// (`avfs mount --foreground`).
	exe func() (string, error)
}

var _ transport.Transport = (*Transport)(nil)

// New is the FUSE transport whose servers run the program exe finds.
func New(exe func() (string, error)) *Transport { return &Transport{exe: exe} }

// Name is "fuse".
func (*Transport) Name() string { return Name }

// Start mounts spec.Vault at spec.Dir from a serving process of its own
// (mountd.Start). It fails with FuseUnavailable on a host without FUSE,
// and with the error that finding the program gave.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Workspace, error) {
	if err := mountd.Available(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, "mount")
	}
	exe, err := t.exe()
	if err != nil {
		return nil, err
	}
	pid, err := mountd.Start(ctx, exe, mountd.Request{Home: spec.Home, Vault: spec.Vault, Mountpoint: spec.Dir,
		ReadOnly: spec.ReadOnly, OwnerPID: spec.OwnerPID, IdleTimeout: spec.IdleTimeout})
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

// Persist has the vault's read-write mount persist what it buffers
// (mountd.Persist); a read-only mount holds no writes.
func (w *workspace) Persist(ctx context.Context) error {
	if w.spec.ReadOnly {
		return nil
	}
	return mountd.Persist(w.spec.Home, w.spec.Vault)
}

// Close unmounts, detaching a mount still held, and waits until the
// server has closed the vault.
func (w *workspace) Close(ctx context.Context) error {
	_, err := mountd.Unmount(ctx, w.spec.Home, w.spec.Dir, mountd.UnmountOptions{DetachBusy: true})
	return err
}
