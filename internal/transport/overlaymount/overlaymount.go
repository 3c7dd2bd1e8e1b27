//go:build linux

// Package overlaymount is the overlay transport: the vault's frozen
// layers materialized as host directories (package overlay's layer
// cache) and stacked by the kernel's overlayfs under a fresh upper dir.
// Nothing serves the workspace, so the command runs at the host disk's
// speed; the host sees the run's writes in the vault only once they are
// ingested, at Persist and at Close. Mounting an overlay needs root in
// the initial user namespace here (Available says why not).
package overlaymount

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// DefaultBudget bounds the layer cache when the caller sets none.
const DefaultBudget = 8 << 30

// Transport starts overlay workspaces, with its layer cache under Root.
type Transport struct {
	Root   string // the layer cache's dir: on the same filesystem as nothing else needs
	Budget int64  // bytes; 0: DefaultBudget
	// Layout is how the cache holds file data ("": $AVFS_OVERLAY_LAYOUT,
	// copies when unset; an unknown name fails the start).
	Layout overlay.Layout

	once     sync.Once
	probeErr error
}

var _ transport.Transport = (*Transport)(nil)

// New is the overlay transport with its cache in root.
func New(root string) *Transport { return &Transport{Root: root} }

// Name is "overlay".
func (*Transport) Name() string { return Name }

// Available says whether this process can mount overlays with the
// markers the cache writes (trusted.overlay.*, root in the initial user
// namespace), by mounting a small one: nil, or the error that says why
// not. It probes once per Transport.
func (t *Transport) Available() error {
	t.once.Do(func() {
		if os.Geteuid() != 0 {
			t.probeErr = &errs.Error{Kind: errs.PermissionDenied, Op: "overlay",
				Err: errors.New("mounting an overlay needs root (the run is not root)")}
			return
		}
		if err := os.MkdirAll(t.Root, 0o700); err != nil {
			t.probeErr = &errs.Error{Kind: errs.IoError, Op: "overlay", Path: t.Root, Err: err}
			return
		}
		t.probeErr = overlay.Probe(t.Root, overlay.Trusted)
	})
	return t.probeErr
}

func (t *Transport) cache() *overlay.Cache {
	b := t.Budget
	if b == 0 {
		b = DefaultBudget
	}
	l := t.Layout
	if l == "" {
		l = overlay.Layout(os.Getenv(overlay.LayoutEnv))
	}
	return &overlay.Cache{Root: t.Root, Budget: b, Format: overlay.Trusted, Layout: l}
}

// Start mounts the working state of spec.Vault at spec.Dir. A read-write
// workspace takes the vault's writer lock as a FUSE mount does
// (VaultLocked when someone holds it), finishes any run a crash left
// (overlay.Cache.Recover), seals the working state if it holds unsaved
// writes, and materializes what the cache lacks. spec.OwnerPID and
// spec.IdleTimeout do not apply: the workspace ends at Close, and one
// whose process died is ingested at the next Start on the vault.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Workspace, error) {
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, "mount")
	}
	if err := t.Available(); err != nil {
		return nil, err
	}
	w := &workspace{spec: spec, cache: t.cache()}
	if !spec.ReadOnly {
		l, err := mountrec.LockWriter(spec.Home, spec.Vault, spec.Dir)
		if err != nil {
			return nil, err
		}
		w.lock = l
	}
	err := w.withVault(func(v *vfs.Vault) error {
		if !spec.ReadOnly {
			if _, err := w.cache.Recover(v); err != nil {
				return err
			}
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		var err error
		if spec.ReadOnly {
			w.run, err = w.cache.StartReadOnly(ctx, v, id, spec.Dir)
		} else {
			w.run, err = w.cache.Start(ctx, v, id, spec.Dir)
		}
		return err
	})
	if err != nil {
		w.release()
		return nil, err
	}
	w.prep = w.run.Prepared
	// The record is what `avfs mounts` lists; held by this process, it
	// is live while the run is.
	rec, err := mountrec.Create(spec.Home, mountrec.Info{Vault: spec.Vault, Mountpoint: spec.Dir, PID: os.Getpid(),
		ReadOnly: spec.ReadOnly, StartedAt: time.Now().UTC(), Transport: Name})
	if err != nil {
		_ = w.run.Discard()
		w.release()
		return nil, err
	}
	w.rec = rec
	_, _ = w.cache.Prune()
	return w, nil
}

// workspace is one overlay run this process started.
type workspace struct {
	spec  transport.Spec
	cache *overlay.Cache
	run   *overlay.Run
	lock  *mountrec.WriterLock
	rec   *mountrec.Record
	prep  overlay.Prepared
	fin   *overlay.Finished
}

func (w *workspace) Dir() string { return w.spec.Dir }

func (w *workspace) Info() transport.Info {
	return transport.Info{Transport: Name, Vault: w.spec.Vault, Dir: w.spec.Dir, ReadOnly: w.spec.ReadOnly}
}

// Prepared says what the start cost: whether a layer was materialized.
func (w *workspace) Prepared() overlay.Prepared { return w.prep }

// Finished is what the ingest at Close did (nil before Close).
func (w *workspace) Finished() *overlay.Finished { return w.fin }

// withVault opens the vault for one step without the Home's write
// guard: this workspace holds the writer lock the guard asks about.
func (w *workspace) withVault(fn func(*vfs.Vault) error) error {
	v, err := w.spec.Home.Unguarded().Open(w.spec.Vault)
	if err != nil {
		return err
	}
	defer v.Close()
	return fn(v)
}

// Persist ingests what the run wrote so far into the vault's working
// state; the workspace goes on.
func (w *workspace) Persist(ctx context.Context) error {
	if w.spec.ReadOnly || w.run == nil {
		return nil
	}
	return w.withVault(func(v *vfs.Vault) error { return w.run.Persist(v) })
}

// Close unmounts and ingests the upper dir in one transaction (a
// read-only workspace just unmounts). An ingest the vault refuses
// (QuotaExceeded) is the error, and the vault keeps its state from
// before the run.
func (w *workspace) Close(ctx context.Context) error {
	if w.run == nil {
		return nil
	}
	defer w.release()
	run := w.run
	w.run = nil
	if w.spec.ReadOnly {
		return run.Discard()
	}
	return w.withVault(func(v *vfs.Vault) error {
		fin, err := run.Finish(v)
		w.fin = &fin
		return err
	})
}

func (w *workspace) release() {
	if w.rec != nil {
		w.rec.Remove()
		w.rec = nil
	}
	if w.lock != nil {
		w.lock.Release()
		w.lock = nil
	}
}
