// Package served gives a transport whose workspaces live in the calling
// process (the overlay transport: it mounts and ingests where it runs) a
// serving process of its own, as FUSE mounts have: `avfs mount
// --transport overlay` and the library's Home.Mount return while the
// workspace lives on, its writer lock and record held by that process
// (mountd.ServeWorkspace), until `avfs unmount`, a signal, or its owner's
// exit ends it.
package served

import (
	"context"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/transport"
)

// Transport starts workspaces of the transport called Name from a
// process of their own.
type Transport struct {
	name      string
	exe       func() (string, error)
	available func() error
}

var _ transport.Transport = (*Transport)(nil)

// New serves the transport called name from the program exe finds;
// available says whether this host lets it mount (nil: yes), before
// any process is started.
func New(name string, exe func() (string, error), available func() error) *Transport {
	return &Transport{name: name, exe: exe, available: available}
}

// Name is the served transport's.
func (t *Transport) Name() string { return t.name }

// Available is the served transport's answer.
func (t *Transport) Available() error { return t.available() }

// Start runs `avfs mount --foreground --transport NAME` and returns once
// it reports the workspace ready, with that process's typed error
// otherwise (mountd.Start).
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Workspace, error) {
	if err := t.available(); err != nil {
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
		ReadOnly: spec.ReadOnly, OwnerPID: spec.OwnerPID, IdleTimeout: spec.IdleTimeout, Transport: t.name,
		Progress: overlay.ProgressOf(ctx)})
	if err != nil {
		return nil, err
	}
	return &workspace{spec: spec, pid: pid, name: t.name}, nil
}

// workspace is one served workspace this process started.
type workspace struct {
	spec transport.Spec
	pid  int
	name string
}

func (w *workspace) Dir() string { return w.spec.Dir }

func (w *workspace) Info() transport.Info {
	return transport.Info{Transport: w.name, Vault: w.spec.Vault, Dir: w.spec.Dir, PID: w.pid, ReadOnly: w.spec.ReadOnly}
}

// Persist has the serving process ingest what the workspace holds
// (mountd.Persist).
func (w *workspace) Persist(ctx context.Context) error {
	if w.spec.ReadOnly {
		return nil
	}
	return mountd.Persist(w.spec.Home, w.spec.Vault)
}

// Close has the serving process ingest and unmount, detaching a mount
// still in use, and waits until it has let go of the vault.
func (w *workspace) Close(ctx context.Context) error {
	_, err := mountd.Unmount(ctx, w.spec.Home, w.spec.Dir, mountd.UnmountOptions{DetachBusy: true})
	return err
}
