//go:build linux

// Package overlaymount is the overlay transport: the vault's frozen
// layers materialized as host directories (package overlay's layer
// cache) and stacked by the kernel's overlayfs under a fresh upper dir.
// Nothing serves the workspace, so the command runs at the host disk's
// speed; the host sees the run's writes in the vault only once they are
// ingested, at Persist and at Close. Root in the initial user namespace
// mounts the stack on the host (trusted.overlay.* markers); any other
// user mounts it inside a user namespace of the command's own
// (user.overlay.* markers, userxattr): its workspace is entered, not
// mounted (Enter), and Available says whether either works here.
package overlaymount

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"syscall"
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
	// Exe is the avfs binary that enters a user namespace for a user
	// other than root (overlay.EnterCommand); nil: only root can use
	// the transport.
	Exe func() (string, error)
	// Layout is how the cache holds file data ("": $AVFS_OVERLAY_LAYOUT,
	// copies when unset; an unknown name fails the start).
	Layout overlay.Layout

	once     sync.Once
	probeErr error
}

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Finisher  = (*workspace)(nil)
)

// New is the overlay transport with its cache in root (set Exe for users
// other than root).
func New(root string) *Transport { return &Transport{Root: root} }

// Name is "overlay".
func (*Transport) Name() string { return Name }

// UserNamespace reports whether this process's runs are mounted in a
// user namespace of their own (it is not root) rather than on the host.
func (*Transport) UserNamespace() bool { return os.Geteuid() != 0 }

func (t *Transport) format() overlay.Format {
	if t.UserNamespace() {
		return overlay.User
	}
	return overlay.Trusted
}

// Available says whether this process can mount overlays with the
// markers its cache writes, by mounting a small one (as root on the host,
// else through the entry helper in a user namespace): nil, or the error
// that says why not. The verdict is cached on disk in Root
// (overlay.CachedProbe) and in the Transport.
func (t *Transport) Available() error {
	t.once.Do(func() {
		f := t.format()
		probe := func() error { return overlay.Probe(t.Root, overlay.Trusted) }
		if f == overlay.User {
			if t.Exe == nil {
				t.probeErr = &errs.Error{Kind: errs.PermissionDenied, Op: "overlay",
					Err: errors.New("mounting an overlay needs root, or avfs's helper for a user namespace (none here)")}
				return
			}
			exe, err := t.Exe()
			if err != nil {
				t.probeErr = err
				return
			}
			probe = func() error { return overlay.ProbeUser(exe, t.Root) }
		}
		t.probeErr = overlay.CachedProbe(t.Root, f, probe)
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
	return &overlay.Cache{Root: t.Root, Budget: b, Format: t.format(), Layout: l}
}

// Start mounts the working state of spec.Vault at spec.Dir. A read-write
// workspace takes the vault's writer lock as a FUSE mount does
// (VaultLocked when someone holds it), finishes any run a crash left
// (overlay.Cache.Recover), seals the working state if it holds unsaved
// writes, and materializes what the cache lacks. spec.OwnerPID does not
// apply: the workspace ends at Close, and one whose process died is
// ingested at the next Start on the vault. spec.IdleTimeout is only
// recorded (mountrec.Info.IdleTimeoutMS), so that a CLI write makes the
// workspace give way; its serving process ends it (mountd.ServeWorkspace).
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Workspace, error) {
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, "mount")
	}
	if err := t.Available(); err != nil {
		return nil, err
	}
	w := &workspace{spec: spec, cache: t.cache(), onto: spec.IdleTimeout > 0 && !spec.ReadOnly}
	w.cache.Volatile = spec.OneRun
	if t.UserNamespace() {
		if spec.ReadOnly {
			return nil, &errs.Error{Kind: errs.InvalidInput, Op: "overlay", Path: spec.Dir,
				Err: errors.New("a read-only overlay workspace is root's (a user's runs read through FUSE)")}
		}
		exe, err := t.Exe()
		if err != nil {
			return nil, err
		}
		w.exe = exe
	}
	if !spec.ReadOnly {
		l, err := mountrec.LockWriter(spec.Home, spec.Vault, spec.Dir)
		if err != nil {
			return nil, err
		}
		w.lock = l
	}
	if caps, err := spec.Home.Caps(spec.Vault); err == nil && caps.SharedOpen && (spec.OneRun || spec.IdleTimeout > 0) && !spec.ReadOnly {
		// A run of one command ingests at its Close: the vault stays
		// open from here to there, one open and one close (the last
		// close checkpoints SQLite's WAL) fewer in the run's set-up and
		// summary; a workspace that lingers for the next runs keeps it
		// open for their checkpoints and summaries alike. Only for an
		// engine whose file other processes open beside this one
		// (SQLite), as the command may.
		v, err := spec.Home.Unguarded().Open(spec.Vault)
		if err != nil {
			w.release()
			return nil, err
		}
		w.v = v
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
		switch {
		case w.exe != "":
			w.run, err = w.cache.StartUnmounted(ctx, v, id, spec.Dir)
		case spec.ReadOnly:
			w.run, err = w.cache.StartReadOnly(ctx, v, id, spec.Dir)
		default:
			w.run, err = w.cache.Start(ctx, v, id, spec.Dir)
		}
		return err
	})
	var me *errs.Error
	if errors.As(err, &me) && me.Op == "overlay mount" && w.exe == "" {
		overlay.ForgetProbe(t.Root, t.format()) // a mount the verdict promised failed: probe again next time
	}
	if err != nil {
		w.release()
		return nil, err
	}
	w.prep = w.run.Prepared
	// The record is what `avfs mounts` lists; held by this process, it
	// is live while the run is.
	rec, err := mountrec.Create(spec.Home, mountrec.Info{Vault: spec.Vault, Mountpoint: spec.Dir, PID: os.Getpid(),
		ReadOnly: spec.ReadOnly, StartedAt: time.Now().UTC(), Transport: Name, IdleTimeoutMS: spec.IdleTimeout.Milliseconds()})
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
	exe   string // the entry helper of a user-namespace workspace ("": mounted on the host)
	// v is the vault a run of one command keeps open from Start to
	// Close (nil: each step opens it).
	v *vfs.Vault
	// onto: the workspace lingers for more runs, whose checkpoints and
	// seals come between its persists (overlay.Run.PersistOnto).
	onto bool
}

// Entered reports whether the workspace is mounted only where a command
// enters it (Enter), in a user namespace of its own.
func (w *workspace) Entered() bool { return w.exe != "" }

// Enter is the argv and the process attributes that run argv (an
// absolute path first) in a user-namespace workspace, in its dir cwd
// (as --cwd names it): the helper mounts the overlay in a namespace of
// the command's own, checks cwd there and execs argv; setupFD is the
// helper's end of the pipe that overlay.EnterFailed reads.
func (w *workspace) Enter(argv []string, cwd string, setupFD int) ([]string, func(*syscall.SysProcAttr)) {
	return overlay.EnterCommand(w.exe, overlay.EnterSpec{Stack: w.run.Stack(), Target: w.spec.Dir,
		Cwd: cwd, Argv: argv, SetupFD: setupFD})
}

func (w *workspace) Dir() string { return w.spec.Dir }

func (w *workspace) Info() transport.Info {
	return transport.Info{Transport: Name, Vault: w.spec.Vault, Dir: w.spec.Dir, ReadOnly: w.spec.ReadOnly}
}

// Prepared says what the start cost: whether a layer was materialized.
func (w *workspace) Prepared() overlay.Prepared { return w.prep }

// Finished is what the ingest at Close did (nil before Close).
func (w *workspace) Finished() *overlay.Finished { return w.fin }

// withVault runs fn on the vault the workspace keeps open (w.v), or
// opens it for one step without the Home's write guard: this workspace
// holds the writer lock the guard asks about. A
// read-only workspace keeps the Home's BeforeOpen: its start seals the
// working state, and a read-write overlay mount of the vault must have
// ingested into it first (mountd.Persist), or that seal would freeze a
// layer its next ingest does not know.
func (w *workspace) withVault(fn func(*vfs.Vault) error) error {
	if w.v != nil {
		return fn(w.v)
	}
	h := w.spec.Home.Unguarded()
	if w.spec.ReadOnly {
		h.BeforeOpen = w.spec.Home.BeforeOpen
	}
	v, err := h.Open(w.spec.Vault)
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
	return w.withVault(w.persist)
}

// persist ingests the upper into v, as the workspace does (onto).
func (w *workspace) persist(v *vfs.Vault) error {
	if w.onto {
		return w.run.PersistOnto(v)
	}
	return w.run.Persist(v)
}

// PersistWith is Persist, then fn on the vault the ingest wrote, so that
// fn (a proxy run's checkpoint or summary, asked of the serving process)
// sees every write made in the workspace.
func (w *workspace) PersistWith(ctx context.Context, fn func(*vfs.Vault) error) error {
	if w.run == nil {
		return &errs.Error{Kind: errs.IoError, Op: "overlay", Path: w.spec.Dir, Err: errors.New("the workspace has ended")}
	}
	return w.withVault(func(v *vfs.Vault) error {
		if w.spec.ReadOnly {
			return fn(v)
		}
		if err := w.persist(v); err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
		if w.onto { // fn may have frozen what the working state stands on
			return w.run.Settle(v)
		}
		return nil
	})
}

// Unsettled says whether the last persist must read names again that
// were written too recently to trust (mountd.Settler).
func (w *workspace) Unsettled() (time.Duration, bool) {
	if w.run == nil || w.spec.ReadOnly {
		return 0, false
	}
	return w.run.Unsettled()
}

// Readlink reads the symlink at vault path p in the merged dir, the live
// state (mountd.Readlinker).
func (w *workspace) Readlink(p string) (string, bool, error) {
	if w.run == nil || w.Entered() {
		return "", false, &errs.Error{Kind: errs.IoError, Op: "readlink", Path: w.spec.Dir,
			Err: errors.New("the workspace is not mounted here")}
	}
	return overlay.Readlink(w.spec.Dir, p)
}

// UpperSize is the entries (files, dirs, whiteouts) and file bytes the
// last Persist found in the upper: what each later one ingests again.
func (w *workspace) UpperSize() (int, int64) {
	if w.run == nil {
		return 0, 0
	}
	return w.run.UpperSize()
}

// Close unmounts and ingests the upper dir in one transaction (a
// read-only workspace just unmounts). An ingest the vault refuses
// (QuotaExceeded) is the error, and the vault keeps its state from
// before the run.
func (w *workspace) Close(ctx context.Context) error { return w.CloseWith(ctx, nil) }

// CloseWith is Close, then fn (when not nil) on the vault the ingest
// wrote, still under the workspace's writer lock (transport.Finisher).
func (w *workspace) CloseWith(ctx context.Context, fn func(*vfs.Vault) error) error {
	if w.run == nil {
		return nil
	}
	defer w.release()
	run := w.run
	w.run = nil
	if w.spec.ReadOnly {
		if err := run.Discard(); err != nil || fn == nil {
			return err
		}
		return w.withVault(fn)
	}
	return w.withVault(func(v *vfs.Vault) error {
		fin, err := run.Finish(v)
		w.fin = &fin
		if err != nil || fn == nil {
			return err
		}
		return fn(v)
	})
}

// End is `avfs unmount` of a mount this process serves. discard throws
// the upper away and gives the vault back its state from the start of the
// mount. Otherwise the upper is ingested first without unmounting, so an
// ingest the vault refuses (QuotaExceeded) is the error with the vault
// unchanged and the mount still there; then the overlay is unmounted
// (unless lazy, a mount in use fails with an error wrapping EBUSY and
// stays) and the upper ingested whole, in one transaction.
func (w *workspace) End(ctx context.Context, lazy, discard bool) error {
	if w.run == nil {
		return nil
	}
	if w.spec.ReadOnly {
		return w.Close(ctx)
	}
	if discard {
		defer w.release()
		run := w.run
		if err := run.Unmount(lazy); err != nil {
			return err
		}
		w.run = nil
		return w.withVault(func(v *vfs.Vault) error { return run.Reset(v) })
	}
	if err := w.Persist(ctx); err != nil {
		return err
	}
	if err := w.run.Unmount(lazy); err != nil {
		return err
	}
	return w.Close(ctx)
}

func (w *workspace) release() {
	if w.v != nil { // before the writer lock goes, as each step's own open
		w.v.Close()
		w.v = nil
	}
	if w.rec != nil {
		w.rec.Remove()
		w.rec = nil
	}
	if w.lock != nil {
		w.lock.Release()
		w.lock = nil
	}
}
