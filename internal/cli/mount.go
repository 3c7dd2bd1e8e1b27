package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/transport/fusemount"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/transport/served"
)

// MountExecutable is the program `avfs mount` starts to serve a mount: the
// running avfs binary. Tests whose binary is not avfs point it elsewhere.
var MountExecutable = os.Executable

func (a *app) mountCmds() []*cobra.Command {
	return []*cobra.Command{a.mountCmd(), a.unmountCmd(), a.mountsCmd()}
}

// mountResult is the JSON of mount.
type mountResult struct {
	Vault      string `json:"vault"`
	Mountpoint string `json:"mountpoint"`
	PID        int    `json:"pid"`
	ReadOnly   bool   `json:"readonly"`
	Transport  string `json:"transport"` // the transport that serves it (package transport)
	// TransportReason says why that transport serves it
	// (transport.ForMount).
	TransportReason string `json:"transport_reason"`
}

func (r mountResult) human(w io.Writer) {
	mode := "read-write"
	if r.ReadOnly {
		mode = "read-only"
	}
	fmt.Fprintf(w, "mounted %s at %s (%s, %s, pid %d)\n", r.Vault, r.Mountpoint, mode, r.Transport, r.PID)
}

// serverArgs are how a mount is served.
type serverArgs struct {
	readonly bool
	owner    int           // end with this process (0: none)
	idle     time.Duration // end after this long unused (0: never)
	// transport is --transport: auto, fuse or overlay.
	transport string
}

func (a *app) mountCmd() *cobra.Command {
	var foreground bool
	var readyFD int
	var sa serverArgs
	c := &cobra.Command{
		Use:   "mount [VAULT] MOUNTPOINT",
		Short: "Serve a vault as a directory (FUSE or overlayfs)",
		Long: `Mount VAULT (default: the selected vault) on the existing directory
MOUNTPOINT. The mount is served by its own avfs process, started in a new
session; the command returns once the mount answers, and prints the serving
process's pid. With --foreground this process serves the mount itself until
it is unmounted or receives SIGINT or SIGTERM. With --owner-pid the mount
also ends when that process exits, however it exits (the proxy starts its
mounts so, and the Go library on request). With --idle-timeout it ends once
it has served nothing for that long and nothing holds it open (the proxy
leaves its mounts so, warm for the next run).

A vault has one writer: while it is mounted read-write, another read-write
mount or a CLI write fails with VaultLocked naming the mountpoint — unless
that mount has an idle timeout and is idle: then it ends at once and gives
way. CLI reads, checkpoints and forks of a mounted vault first ask the mount
to persist what it buffers, so they see every write made through it.
Read-only mounts may be many. Unmount with ` + "`avfs unmount MOUNTPOINT`" + `.

--transport (default auto) says what serves the mount. fuse: avfs serves the
vault live; every write through the mount is the vault's at once. overlay:
the kernel's overlayfs stacks the vault's layers, materialized on the host,
under an upper dir in the runtime dir; the host works at its disk's speed
and the vault gets the writes when they are ingested, in one transaction:
before any read of the vault (cat, diff, checkpoint save, a fork), and at
unmount. An ingest the vault refuses (QuotaExceeded) changes nothing and
the mount stays; ` + "`avfs unmount --discard`" + ` throws its writes away. Overlay
needs root, takes no --idle-timeout, and a serving process holds its writer
lock and record as for FUSE; if that process is killed, the next overlay
mount of the vault ingests what it left. auto takes FUSE, the live view,
and overlay only where FUSE is unavailable; the result's transport_reason
says why.`,
		Args: rangeArgs(1, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			switch {
			case sa.idle < 0:
				return nil, invalidf("mount", "--idle-timeout must be 0 (never) or positive, not %v", sa.idle)
			case sa.owner < 0:
				return nil, invalidf("mount", "--owner-pid must be a process id, or 0 for none, not %d", sa.owner)
			case readyFD < 0:
				return nil, invalidf("mount", "--ready-fd must be a file descriptor, not %d", readyFD)
			case sa.transport != transport.Auto && sa.transport != transport.FUSE && sa.transport != transport.Overlay:
				return nil, invalidf("mount", "--transport must be auto, fuse or overlay, not %q", sa.transport)
			case sa.transport == transport.Overlay && sa.idle > 0 && readyFD <= 0:
				// A proxy run's lingering overlay (a server avfs starts,
				// --ready-fd) counts its runs' requests as use; a person's
				// work in the mount is nothing its server sees.
				return nil, invalidf("mount", "an overlay mount has no --idle-timeout: nothing sees it used; unmount it")
			}
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			name := ""
			if len(args) == 2 {
				name = args[0]
			} else if name, err = a.vaultName(h); err != nil {
				return nil, err
			}
			// The writer check is the parent's for a server it started
			// (--ready-fd): the server only takes the writer lock.
			mnt, err := mountd.Prepare(h, name, args[len(args)-1], sa.readonly || readyFD > 0)
			if err != nil {
				return nil, err
			}
			ts, err := a.transports(h)
			if err != nil {
				return nil, err
			}
			if foreground {
				if sa.transport == transport.Overlay {
					return a.serveWorkspace(h, name, mnt, sa, readyFD)
				}
				if err := mountd.Available(); err != nil {
					return nil, err
				}
				return a.serveMount(h, name, mnt, sa, readyFD)
			}
			t, reason, err := transport.ForMount(ts, sa.transport, mountd.Available)
			if err != nil {
				return nil, err
			}
			if t.Name() == transport.Overlay && sa.idle > 0 {
				return nil, invalidf("mount", "an overlay mount has no --idle-timeout: nothing sees it used; unmount it")
			}
			ws, err := t.Start(a.materializing(a.ctx), transport.Spec{Home: h, Vault: name, Dir: mnt, ReadOnly: sa.readonly,
				OwnerPID: sa.owner, IdleTimeout: sa.idle})
			if err != nil {
				return nil, err
			}
			in := ws.Info()
			return mountResult{Vault: name, Mountpoint: mnt, PID: in.PID, ReadOnly: sa.readonly, Transport: in.Transport,
				TransportReason: reason}, nil
		}),
	}
	f := c.Flags()
	f.BoolVar(&sa.readonly, "readonly", false, "mount read-only")
	f.BoolVar(&foreground, "foreground", false, "serve the mount from this process until unmounted")
	f.IntVar(&readyFD, "ready-fd", 0, "report readiness on this file descriptor (used by avfs itself)")
	_ = f.MarkHidden("ready-fd")
	f.IntVar(&sa.owner, "owner-pid", 0, "unmount when this process exits (0: the mount outlives its caller)")
	f.DurationVar(&sa.idle, "idle-timeout", 0, "unmount after serving nothing for this long, and give way to a CLI write when idle (0: never)")
	f.StringVar(&sa.transport, "transport", transport.Auto, "what serves the mount: auto (FUSE where it is available), fuse, overlay")
	return c
}

// transports are the workspace transports of `avfs mount`, each served
// from a process of its own; the first is the default.
func (a *app) transports(h *registry.Home) (*transport.Registry, error) {
	ov, err := a.overlayTransport(h)
	if err != nil {
		return nil, err
	}
	return transport.NewRegistry(a.fuseTransport(),
		served.New(transport.Overlay, a.mountExecutable, ov.Available))
}

// overlayTransport is the overlay transport as this process runs it.
func (a *app) overlayTransport(h *registry.Home) (*overlaymount.Transport, error) {
	runDir, err := proxy.RuntimeDir(h.Dir, a.env.Getenv("XDG_RUNTIME_DIR"))
	if err != nil {
		return nil, err
	}
	return overlaymount.New(overlaymount.CacheDir(runDir)), nil
}

func (a *app) mountExecutable() (string, error) {
	exe, err := MountExecutable()
	if err != nil {
		return "", &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
	}
	return exe, nil
}

// fuseTransport is the FUSE transport, its servers run as this program.
func (a *app) fuseTransport() *fusemount.Transport {
	return fusemount.New(a.mountExecutable)
}

// serveWorkspace serves an overlay mount from this process: it mounts
// (recovering first what a killed server of the vault left), holds the
// writer lock and the record, and answers the control socket until the
// mount is ended (mountd.ServeWorkspace).
func (a *app) serveWorkspace(h *registry.Home, name, mnt string, sa serverArgs, readyFD int) (any, error) {
	ready := mountd.NewReporter(readyFD)
	defer ready.Close()
	ctx, stopSignals := signal.NotifyContext(a.ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	h.WriteGuard = nil // this process is the vault's writer, or reads
	if !sa.readonly {
		h.BeforeOpen = nil // its own flush is the persist
	}
	// The first materializing is reported to the process that waits for
	// the mount (each report also tells it this one is alive), or drawn
	// here on a terminal when none waits.
	start := a.materializing(ctx)
	if ready != nil {
		start = overlay.WithProgress(ctx, ready.Progress)
	}
	ws, err := a.startOverlay(start, h, name, mnt, sa)
	if err != nil {
		ready.Fail(err)
		return nil, err
	}
	if ready == nil {
		a.emit(mountResult{Vault: name, Mountpoint: mnt, PID: os.Getpid(), ReadOnly: sa.readonly,
			Transport: transport.Overlay, TransportReason: transport.AskedFor})
	}
	return nil, mountd.ServeWorkspace(ctx, h, ws, mountd.WorkspaceOptions{OwnerPID: sa.owner,
		Control: proxy.ServerOps(), IdleTimeout: sa.idle, Log: a.env.Stderr}, ready)
}

func (a *app) startOverlay(ctx context.Context, h *registry.Home, name, mnt string, sa serverArgs) (transport.Workspace, error) {
	ov, err := a.overlayTransport(h)
	if err != nil {
		return nil, err
	}
	if err := ov.Available(); err != nil {
		return nil, err
	}
	// A server of this vault's overlay mount here that was killed left
	// the overlay mounted: the start's recovery unmounts and ingests it.
	stale, ok := mountrec.Find(h, mnt)
	recovering := ok && !stale.Live && stale.Transport == transport.Overlay && stale.Vault == name
	if !recovering {
		if err := mountd.CheckMountpoint(mnt); err != nil {
			return nil, err
		}
	}
	return ov.Start(ctx, transport.Spec{Home: h, Vault: name, Dir: mnt, ReadOnly: sa.readonly, IdleTimeout: sa.idle})
}

// helperExecutable is the avfs binary a run re-executes as its helper
// (the one that serves mounts).
func (a *app) helperExecutable() (string, error) {
	exe, err := MountExecutable()
	if err != nil {
		return "", &errs.Error{Kind: errs.IoError, Op: "proxy exec", Err: err}
	}
	return exe, nil
}

// serveMount serves a mount from this process until it is unmounted or
// a signal arrives.
func (a *app) serveMount(h *registry.Home, name, mnt string, sa serverArgs, readyFD int) (any, error) {
	ready := mountd.NewReporter(readyFD)
	defer ready.Close()
	// Caught from here on, so that a signal during the mount ends it
	// cleanly too.
	ctx, stopSignals := signal.NotifyContext(a.ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	h.WriteGuard = nil // this process is the vault's writer
	h.BeforeOpen = nil
	// A soft limit for the Go heap of the serving process: the write-back
	// budget (64 MiB) and SQLite's page caches are its live memory, and
	// without a limit the collector lets a streaming write grow the heap
	// to twice that before it runs.
	debug.SetMemoryLimit(serverMemoryLimit)
	// AVFS_MOUNT_DEBUG=1 logs every FUSE request to the server's stderr.
	debug := a.env.Getenv("AVFS_MOUNT_DEBUG") == "1"
	// AVFS_MOUNT_CPUPROFILE=FILE writes the server's CPU profile there.
	if path := a.env.Getenv("AVFS_MOUNT_CPUPROFILE"); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			ready.Fail(err)
			return nil, err
		}
		defer stop()
	}
	// AVFS_MOUNT_GC=0 turns off the background garbage collection.
	noGC := a.env.Getenv("AVFS_MOUNT_GC") == "0"
	s := mountd.New(mountd.Options{Home: h, Vault: name, Mountpoint: mnt, ReadOnly: sa.readonly,
		Log: a.env.Stderr, Debug: debug, Control: proxy.ServerOps(), IdleTimeout: sa.idle, NoGC: noGC})
	if err := s.Mount(); err != nil {
		ready.Fail(err)
		return nil, err
	}
	reason := transport.AutoFUSE
	if sa.transport == transport.FUSE {
		reason = transport.AskedFor
	}
	res := mountResult{Vault: name, Mountpoint: s.Mountpoint(), PID: os.Getpid(), ReadOnly: sa.readonly, Transport: mountrec.FUSE,
		TransportReason: reason}
	if ready != nil {
		ready.Ready()
	} else {
		a.emit(res)
	}
	return nil, s.Serve(ctx, sa.owner)
}

// serverMemoryLimit is the soft memory limit of a mount's serving process.
const serverMemoryLimit = 112 << 20

// unmountResult is the JSON of unmount.
type unmountResult struct {
	Mountpoint string `json:"mountpoint"`
	Vault      string `json:"vault,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Lazy       bool   `json:"lazy"`
	// Transport is what served the mount; Discarded says its writes the
	// vault did not hold were thrown away (--discard).
	Transport string `json:"transport,omitempty"`
	Discarded bool   `json:"discarded,omitempty"`
}

func (r unmountResult) human(w io.Writer) {
	fmt.Fprintf(w, "unmounted %s\n", r.Mountpoint)
}

func (a *app) unmountCmd() *cobra.Command {
	var lazy, discard bool
	c := &cobra.Command{
		Use:   "unmount MOUNTPOINT",
		Short: "Unmount a vault and wait for its server to finish",
		Long: `Unmount the avfs mount at MOUNTPOINT and wait until its serving process
has persisted everything, closed the vault and gone. Files still in use make
it fail with MountBusy; --lazy detaches the mount at once and lets the
server finish when the last of them is closed.

An overlay mount is ingested first, in one transaction, then unmounted. An
ingest the vault refuses (QuotaExceeded: free space in the mount or raise
the quota) changes nothing and the mount stays; --discard throws the
mount's writes away instead and gives the vault back its state from the
start of the mount (checkpoints saved meanwhile stay). --lazy on an overlay
mount in use detaches it and ingests what is there: what is written through
files still open after that is not the vault's.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			mnt, err := mountd.CleanMountpoint(args[0])
			if err != nil {
				return nil, err
			}
			info, err := mountd.Unmount(a.ctx, h, mnt, mountd.UnmountOptions{Lazy: lazy, Discard: discard})
			if err != nil {
				return nil, err
			}
			return unmountResult{Mountpoint: mnt, Vault: info.Vault, PID: info.PID, Lazy: lazy,
				Transport: info.Transport, Discarded: discard}, nil
		}),
	}
	c.Flags().BoolVar(&lazy, "lazy", false, "detach now even if files are in use (MNT_DETACH)")
	c.Flags().BoolVar(&discard, "discard", false, "overlay: throw away the writes the vault does not hold instead of ingesting them")
	return c
}

// mountsResult is the JSON of mounts.
type mountsResult struct {
	Mounts []mountrec.Info `json:"mounts"`
	Pruned []mountrec.Info `json:"pruned,omitempty"`
}

func (r mountsResult) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VAULT\tMOUNTPOINT\tPID\tMODE\tTRANSPORT\tSTATE")
	for _, m := range r.Mounts {
		mode, state := "rw", "live"
		if m.ReadOnly {
			mode = "ro"
		}
		if !m.Live {
			state = "dead (avfs mounts --prune)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", m.Vault, m.Mountpoint, m.PID, mode, m.Transport, state)
	}
	tw.Flush()
	for _, m := range r.Pruned {
		fmt.Fprintf(w, "pruned %s (%s)\n", m.Mountpoint, m.Vault)
	}
}

func (a *app) mountsCmd() *cobra.Command {
	var prune bool
	c := &cobra.Command{
		Use:   "mounts",
		Short: "List the mounts of this avfs home",
		Long: `List the vaults mounted from this avfs home, with their serving processes
and the transport that serves each (fuse, overlay).
A mount whose server died is shown as not live; --prune removes its record
and detaches what the kernel still holds of it.`,
		Args: noArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			var r mountsResult
			if prune {
				if r.Pruned, err = mountrec.Prune(h); err != nil {
					return nil, err
				}
			}
			r.Mounts, err = mountrec.List(h)
			return r, err
		}),
	}
	c.Flags().BoolVar(&prune, "prune", false, "remove the records of mounts whose server died")
	return c
}

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
