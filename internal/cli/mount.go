package cli

import (
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
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/transport/fusemount"
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
}

func (r mountResult) human(w io.Writer) {
	mode := "read-write"
	if r.ReadOnly {
		mode = "read-only"
	}
	fmt.Fprintf(w, "mounted %s at %s (%s, pid %d)\n", r.Vault, r.Mountpoint, mode, r.PID)
}

// serverArgs are how a mount is served.
type serverArgs struct {
	readonly bool
	owner    int           // end with this process (0: none)
	idle     time.Duration // end after this long unused (0: never)
}

func (a *app) mountCmd() *cobra.Command {
	var foreground bool
	var readyFD int
	var sa serverArgs
	c := &cobra.Command{
		Use:   "mount [VAULT] MOUNTPOINT",
		Short: "Serve a vault as a directory (FUSE)",
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
Read-only mounts may be many. Unmount with ` + "`avfs unmount MOUNTPOINT`" + `.`,
		Args: rangeArgs(1, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			switch {
			case sa.idle < 0:
				return nil, invalidf("mount", "--idle-timeout must be 0 (never) or positive, not %v", sa.idle)
			case sa.owner < 0:
				return nil, invalidf("mount", "--owner-pid must be a process id, or 0 for none, not %d", sa.owner)
			case readyFD < 0:
				return nil, invalidf("mount", "--ready-fd must be a file descriptor, not %d", readyFD)
			}
			if err := mountd.Available(); err != nil {
				return nil, err
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
			if foreground {
				return a.serveMount(h, name, mnt, sa, readyFD)
			}
			ts, err := a.transports()
			if err != nil {
				return nil, err
			}
			t, err := ts.Get("")
			if err != nil {
				return nil, err
			}
			ws, err := t.Start(a.ctx, transport.Spec{Home: h, Vault: name, Dir: mnt, ReadOnly: sa.readonly,
				OwnerPID: sa.owner, IdleTimeout: sa.idle})
			if err != nil {
				return nil, err
			}
			in := ws.Info()
			return mountResult{Vault: name, Mountpoint: mnt, PID: in.PID, ReadOnly: sa.readonly, Transport: in.Transport}, nil
		}),
	}
	f := c.Flags()
	f.BoolVar(&sa.readonly, "readonly", false, "mount read-only")
	f.BoolVar(&foreground, "foreground", false, "serve the mount from this process until unmounted")
	f.IntVar(&readyFD, "ready-fd", 0, "report readiness on this file descriptor (used by avfs itself)")
	_ = f.MarkHidden("ready-fd")
	f.IntVar(&sa.owner, "owner-pid", 0, "unmount when this process exits (0: the mount outlives its caller)")
	f.DurationVar(&sa.idle, "idle-timeout", 0, "unmount after serving nothing for this long, and give way to a CLI write when idle (0: never)")
	return c
}

// transports are the workspace transports of this program; the first is
// the default.
func (a *app) transports() (*transport.Registry, error) {
	return transport.NewRegistry(a.fuseTransport())
}

// fuseTransport is the FUSE transport, its servers run as this program.
func (a *app) fuseTransport() *fusemount.Transport {
	return fusemount.New(func() (string, error) {
		exe, err := MountExecutable()
		if err != nil {
			return "", &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
		}
		return exe, nil
	})
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
	res := mountResult{Vault: name, Mountpoint: s.Mountpoint(), PID: os.Getpid(), ReadOnly: sa.readonly, Transport: mountrec.FUSE}
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
}

func (r unmountResult) human(w io.Writer) {
	fmt.Fprintf(w, "unmounted %s\n", r.Mountpoint)
}

func (a *app) unmountCmd() *cobra.Command {
	var lazy bool
	c := &cobra.Command{
		Use:   "unmount MOUNTPOINT",
		Short: "Unmount a vault and wait for its server to finish",
		Long: `Unmount the avfs mount at MOUNTPOINT and wait until its serving process
has persisted everything, closed the vault and gone. Files still in use make
it fail with MountBusy; --lazy detaches the mount at once and lets the
server finish when the last of them is closed.`,
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
			info, err := mountd.Unmount(a.ctx, h, mnt, mountd.UnmountOptions{Lazy: lazy})
			if err != nil {
				return nil, err
			}
			return unmountResult{Mountpoint: mnt, Vault: info.Vault, PID: info.PID, Lazy: lazy}, nil
		}),
	}
	c.Flags().BoolVar(&lazy, "lazy", false, "detach now even if files are in use (MNT_DETACH)")
	return c
}

// mountsResult is the JSON of mounts.
type mountsResult struct {
	Mounts []mountrec.Info `json:"mounts"`
	Pruned []mountrec.Info `json:"pruned,omitempty"`
}

func (r mountsResult) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VAULT\tMOUNTPOINT\tPID\tMODE\tSTATE")
	for _, m := range r.Mounts {
		mode, state := "rw", "live"
		if m.ReadOnly {
			mode = "ro"
		}
		if !m.Live {
			state = "dead (avfs mounts --prune)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", m.Vault, m.Mountpoint, m.PID, mode, state)
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
		Long: `List the vaults mounted from this avfs home, with their serving processes.
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
