package avfs

import (
	"context"
	"os"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/transport/fusemount"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/transport/served"
)

// MountOptions are the settings of a mount.
type MountOptions struct {
	// ReadOnly mounts the vault read-only. A vault has one read-write
	// mount at a time; read-only mounts may be many.
	ReadOnly bool
	// OwnerPID ends the mount when that process exits, however it exits
	// (os.Getpid() ties the mount to the caller's life); 0 lets the mount
	// outlive its caller until Unmount.
	OwnerPID int
	// IdleTimeout ends the mount once it has served nothing for that
	// long and nothing holds it; such a mount also gives way at once to
	// a write to the vault from elsewhere when it is idle. Zero: never.
	// An overlay mount takes none.
	IdleTimeout time.Duration
	// Transport is what serves the mount: TransportAuto (the default,
	// "": FUSE, the live view, where FUSE is available), TransportFUSE
	// (every write through the mount is the vault's at once) or
	// TransportOverlay (overlayfs at the host disk's speed; the vault gets
	// the writes when they are ingested: before any read of the vault,
	// and at Unmount; needs root). Mount.TransportReason says why.
	Transport TransportMode
}

// Mount is a vault served as a directory by its own avfs process.
type Mount struct {
	Vault      string
	Mountpoint string // absolute, symlinks resolved
	PID        int    // the serving process
	ReadOnly   bool
	// Transport is what serves the mount (TransportFUSE or
	// TransportOverlay) and TransportReason why.
	Transport       TransportMode
	TransportReason string
	home            *Home
}

// MountInfo is the record of one mount of a home.
type MountInfo struct {
	Vault      string
	Mountpoint string
	PID        int // the serving process
	ReadOnly   bool
	StartedAt  time.Time
	// IdleTimeout is how long the mount may go unused before it ends; 0:
	// it lasts until unmounted.
	IdleTimeout time.Duration
	// Transport names what serves the mount ("fuse", "overlay").
	Transport string
	// Live is false when the serving process is gone (a stale record,
	// which `avfs mounts --prune` removes).
	Live bool
}

func mountInfo(i mountrec.Info) MountInfo {
	return MountInfo{Vault: i.Vault, Mountpoint: i.Mountpoint, PID: i.PID, ReadOnly: i.ReadOnly, StartedAt: i.StartedAt,
		IdleTimeout: time.Duration(i.IdleTimeoutMS) * time.Millisecond, Transport: i.Transport, Live: i.Live}
}

// Mount serves vault on the existing directory mountpoint and returns once
// the mount answers. The mount is served by its own avfs process, started
// exactly as `avfs mount` starts it (`avfs mount --foreground`, once:
// go-fuse documents deadlocks when one process both serves a mount and
// uses it): it outlives this process until Unmount, `avfs unmount`, or a
// signal to that process.
//
// With opts.Transport TransportOverlay the serving process mounts an
// overlay instead and holds the vault's writer lock; a user who is not
// root gets PermissionDenied.
//
// It fails with FuseUnavailable on a host without FUSE, BinaryNotFound when
// no avfs program is found (see WithBinary), VaultLocked when the vault is
// already mounted read-write, MountFailed when the kernel refuses
// (mounting needs root, or CAP_SYS_ADMIN, on Linux), and Interrupted when
// ctx ends before the mount answers (the serving process is then
// stopped).
func (h *Home) Mount(ctx context.Context, vault, mountpoint string, opts *MountOptions) (*Mount, error) {
	m, err := h.mount(ctx, vault, mountpoint, opts)
	return m, wrapErr(err)
}

// mount is Mount with the errors of the layers below.
func (h *Home) mount(ctx context.Context, vault, mountpoint string, opts *MountOptions) (*Mount, error) {
	if opts == nil {
		opts = &MountOptions{}
	}
	if opts.OwnerPID < 0 || opts.IdleTimeout < 0 {
		return nil, errs.New(errs.InvalidInput, "mount", "OwnerPID and IdleTimeout must be 0 or positive, not %d and %v", opts.OwnerPID, opts.IdleTimeout)
	}
	switch opts.Transport {
	case "", TransportAuto, TransportFUSE, TransportOverlay:
	default:
		return nil, errs.New(errs.InvalidInput, "mount", "Transport must be auto, fuse or overlay, not %q", opts.Transport)
	}
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, "mount")
	}
	mnt, err := mountd.Prepare(h.reg, vault, mountpoint, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	ts, err := h.transports()
	if err != nil {
		return nil, err
	}
	t, reason, err := transport.ForMount(ts, string(opts.Transport), mountd.Available)
	if err != nil {
		return nil, err
	}
	if t.Name() == transport.Overlay && opts.IdleTimeout > 0 {
		return nil, errs.New(errs.InvalidInput, "mount", "an overlay mount takes no IdleTimeout: nothing sees it used")
	}
	ws, err := t.Start(ctx, transport.Spec{Home: h.reg, Vault: vault, Dir: mnt, ReadOnly: opts.ReadOnly,
		OwnerPID: opts.OwnerPID, IdleTimeout: opts.IdleTimeout})
	if err != nil {
		return nil, err
	}
	in := ws.Info()
	return &Mount{Vault: vault, Mountpoint: in.Dir, PID: in.PID, ReadOnly: in.ReadOnly,
		Transport: TransportMode(in.Transport), TransportReason: reason, home: h}, nil
}

// transports are the workspace transports of the library's mounts, each
// served by the avfs program h finds; the first is the default.
func (h *Home) transports() (*transport.Registry, error) {
	runDir, err := proxy.RuntimeDir(h.reg.Dir, os.Getenv("XDG_RUNTIME_DIR"))
	if err != nil {
		return nil, err
	}
	ov := overlaymount.New(overlaymount.CacheDir(runDir))
	return transport.NewRegistry(h.fuseTransport(),
		served.New(transport.Overlay, func() (string, error) { return h.binary("mount") }, ov.Available))
}

// fuseTransport is FUSE served by the avfs program h finds.
func (h *Home) fuseTransport() transport.Transport {
	return fusemount.New(func() (string, error) { return h.binary("mount") })
}

// Unmount unmounts and waits until the serving process has persisted
// every write, closed the vault and exited. Files still in use fail it
// with MountBusy; close them and call it again. An overlay mount is
// ingested first; an ingest the vault refuses fails it with
// QuotaExceeded, the vault unchanged and the mount still there. When ctx ends before the
// unmount, nothing is done; when it ends during the wait, the wait is
// abandoned with an Interrupted error and the server finishes by itself.
func (m *Mount) Unmount(ctx context.Context) error {
	_, err := mountd.Unmount(ctx, m.home.reg, m.Mountpoint, mountd.UnmountOptions{})
	return wrapErr(err)
}

// Discard ends an overlay mount without ingesting it: what was written
// through it that the vault does not hold yet is thrown away, and the
// vault's working state is again what it was when the mount started
// (checkpoints saved meanwhile stay). A FUSE mount's writes are the
// vault's already: InvalidInput.
func (m *Mount) Discard(ctx context.Context) error {
	_, err := mountd.Unmount(ctx, m.home.reg, m.Mountpoint, mountd.UnmountOptions{Discard: true})
	return wrapErr(err)
}

// Mounts lists the mounts of this home; Live is false for a mount whose
// server died.
func (h *Home) Mounts(ctx context.Context) ([]MountInfo, error) {
	if err := stopped(ctx, "mounts"); err != nil {
		return nil, err
	}
	infos, err := mountrec.List(h.reg)
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]MountInfo, len(infos))
	for i, in := range infos {
		out[i] = mountInfo(in)
	}
	return out, nil
}
