package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mount"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// MountExecutable is the program `avfs mount` starts to serve a mount: the
// running avfs binary. Tests whose binary is not avfs point it elsewhere.
var MountExecutable = os.Executable

// mountReadyTimeout bounds the wait for a serving process to report the
// mount ready.
const mountReadyTimeout = 30 * time.Second

func (a *app) mountCmds() []*cobra.Command {
	return []*cobra.Command{a.mountCmd(), a.unmountCmd(), a.mountsCmd()}
}

// mountResult is the JSON of mount.
type mountResult struct {
	Vault      string `json:"vault"`
	Mountpoint string `json:"mountpoint"`
	PID        int    `json:"pid"`
	ReadOnly   bool   `json:"readonly"`
}

func (r mountResult) human(w io.Writer) {
	mode := "read-write"
	if r.ReadOnly {
		mode = "read-only"
	}
	fmt.Fprintf(w, "mounted %s at %s (%s, pid %d)\n", r.Vault, r.Mountpoint, mode, r.PID)
}

// readyMsg is what a serving process reports on its ready pipe: either the
// mount is ready or why it failed.
type readyMsg struct {
	Ready   bool           `json:"ready"`
	PID     int            `json:"pid"`
	Kind    errs.Kind      `json:"error,omitempty"`
	Op      string         `json:"op,omitempty"`
	Path    string         `json:"path,omitempty"`
	Vault   string         `json:"vault,omitempty"`
	Message string         `json:"message,omitempty"` // the cause, without op, path and vault
	Hint    string         `json:"hint,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
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
			if err := mount.Available(); err != nil {
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
			if err := registry.CheckName(name); err != nil {
				return nil, err
			}
			mnt, err := mount.CleanMountpoint(args[len(args)-1])
			if err != nil {
				return nil, err
			}
			if !sa.readonly && readyFD == 0 {
				// Fail early, or let an idle mount of the vault give way.
				if err := mount.CheckWriter(h, name); err != nil {
					return nil, err
				}
			}
			if foreground {
				return a.serveMount(h, name, mnt, sa, readyFD)
			}
			return a.startMount(a.ctx, h, name, mnt, sa)
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

// startMount starts `avfs mount --foreground` in a new session and waits
// for it to report the mount ready. When ctx ends first, the server gets
// SIGTERM (it unmounts, if it got that far, and exits) and the error is
// Interrupted.
func (a *app) startMount(ctx context.Context, h *registry.Home, name, mnt string, sa serverArgs) (any, error) {
	exe, err := MountExecutable()
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
	}
	logPath, err := mount.LogPath(h, mnt)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Path: logPath, Err: err}
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
	}
	defer pr.Close()
	args := []string{"mount", "--foreground", "--ready-fd", "3", "--home", h.Dir, name, mnt}
	if sa.readonly {
		args = append(args, "--readonly")
	}
	if sa.owner > 0 {
		args = append(args, "--owner-pid", strconv.Itoa(sa.owner))
	}
	if sa.idle > 0 {
		args = append(args, "--idle-timeout", sa.idle.String())
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = append(os.Environ(), h.Env()...)
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
	}
	pw.Close()
	// Reap the server if it exits while this process lives (tests run the
	// command line in-process); otherwise it outlives us by design.
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	type report struct {
		msg readyMsg
		err error
	}
	ready := make(chan report, 1)
	go func() {
		msg, err := readReady(pr, mountReadyTimeout)
		ready <- report{msg, err}
	}()
	var msg readyMsg
	select {
	case r := <-ready:
		msg, err = r.msg, r.err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(mountReadyTimeout):
			_ = cmd.Process.Kill()
		}
		return nil, errs.Stopped(ctx, "mount")
	}
	if err != nil || !msg.Ready {
		_ = cmd.Process.Kill()
		if err == nil {
			err = &errs.Error{Kind: msg.Kind, Op: msg.Op, Path: msg.Path, Vault: msg.Vault,
				Err: errors.New(msg.Message), Hint: msg.Hint, Extra: msg.Extra}
		}
		return nil, err
	}
	return mountResult{Vault: name, Mountpoint: mnt, PID: msg.PID, ReadOnly: sa.readonly}, nil
}

// readReady reads the serving process's report.
func readReady(r *os.File, timeout time.Duration) (readyMsg, error) {
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	var msg readyMsg
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &msg)
	}
	if err != nil {
		return msg, &errs.Error{Kind: mount.MountFailed, Op: "mount",
			Err:  fmt.Errorf("the serving process did not report the mount ready: %v", err),
			Hint: "see the mount's log under $AVFS_HOME/mounts/"}
	}
	return msg, nil
}

// serveMount serves a mount from this process until it is unmounted or
// a signal arrives.
func (a *app) serveMount(h *registry.Home, name, mnt string, sa serverArgs, readyFD int) (any, error) {
	var ready *os.File
	if readyFD > 0 {
		ready = os.NewFile(uintptr(readyFD), "ready")
		defer ready.Close()
	}
	report := func(m readyMsg) {
		if ready != nil {
			b, _ := json.Marshal(m)
			_, _ = ready.Write(append(b, '\n'))
			ready.Close()
			ready = nil
		}
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
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
			report(failureMsg(err))
			return nil, err
		}
		defer stop()
	}
	// AVFS_MOUNT_GC=0 turns off the background garbage collection.
	noGC := a.env.Getenv("AVFS_MOUNT_GC") == "0"
	s := mount.New(mount.Options{Home: h, Vault: name, Mountpoint: mnt, ReadOnly: sa.readonly,
		Log: a.env.Stderr, Debug: debug, Control: proxy.ServerOps(), IdleTimeout: sa.idle, NoGC: noGC})
	if err := s.Mount(); err != nil {
		report(failureMsg(err))
		return nil, err
	}
	res := mountResult{Vault: name, Mountpoint: s.Mountpoint(), PID: os.Getpid(), ReadOnly: sa.readonly}
	if ready != nil {
		report(readyMsg{Ready: true, PID: os.Getpid()})
	} else {
		a.emit(res)
	}
	var ownerGone <-chan struct{} // nil: no owner, never ready
	if sa.owner > 0 {
		ownerGone = mount.WatchOwner(sa.owner)
	}
	for {
		select {
		case <-s.Done():
			return nil, s.Wait()
		case <-a.ctx.Done():
			return nil, stopMount(s)
		case <-sigs:
			return nil, stopMount(s)
		case <-ownerGone:
			return nil, stopMount(s)
		}
	}
}

// serverMemoryLimit is the soft memory limit of a mount's serving process.
const serverMemoryLimit = 112 << 20

// failureMsg carries a mount failure to the process that waits for it.
func failureMsg(err error) readyMsg {
	var te *errs.Error
	if !errors.As(err, &te) {
		return readyMsg{Kind: errs.KindOf(err), Message: err.Error()}
	}
	m := readyMsg{Kind: te.Kind, Op: te.Op, Path: te.Path, Vault: te.Vault, Hint: te.Hint, Extra: te.Extra}
	c := *te
	c.Op, c.Path, c.Vault, c.Hint = "", "", "", ""
	m.Message = c.Error()
	return m
}

// stopMount ends a served mount on a signal: a clean unmount if nothing
// holds it, else a detach, so the server never stays behind.
func stopMount(s *mount.Session) error {
	err := s.Unmount(false)
	if errs.Is(err, mount.MountBusy) {
		err = s.Unmount(true)
	}
	return err
}

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
			mnt, err := mount.CleanMountpoint(args[0])
			if err != nil {
				return nil, err
			}
			info, hasRecord := mount.Find(h, mnt)
			if !mount.IsAvfsMount(mnt) {
				if hasRecord && !info.Live {
					_, _ = mount.Prune(h)
				}
				return nil, &errs.Error{Kind: mount.NotMounted, Op: "unmount", Path: mnt,
					Err: errors.New("no avfs mount at this directory")}
			}
			if err := mount.Unmount(mnt, lazy); err != nil {
				if errors.Is(err, syscall.EBUSY) {
					return nil, &errs.Error{Kind: mount.MountBusy, Op: "unmount", Path: mnt, Err: err,
						Hint: "close the files in use, or pass --lazy"}
				}
				return nil, &errs.Error{Kind: errs.IoError, Op: "unmount", Path: mnt, Err: err}
			}
			if !lazy {
				if err := waitGone(a.ctx, h, mnt, info.PID); err != nil {
					return nil, err
				}
			}
			return unmountResult{Mountpoint: mnt, Vault: info.Vault, PID: info.PID, Lazy: lazy}, nil
		}),
	}
	c.Flags().BoolVar(&lazy, "lazy", false, "detach now even if files are in use (MNT_DETACH)")
	return c
}

// waitGone waits up to mountReadyTimeout for the server of an unmounted
// mount to finish, giving up with Interrupted when ctx ends: the server
// finishes without us.
func waitGone(ctx context.Context, h *registry.Home, mnt string, pid int) error {
	deadline := time.Now().Add(mountReadyTimeout)
	for !mount.WaitGone(h, mnt, 50*time.Millisecond) {
		if ctx.Err() != nil {
			return errs.Stopped(ctx, "unmount")
		}
		if time.Now().After(deadline) {
			return &errs.Error{Kind: errs.IoError, Op: "unmount", Path: mnt,
				Err: fmt.Errorf("the serving process (pid %d) did not finish", pid)}
		}
	}
	return nil
}

// mountsResult is the JSON of mounts.
type mountsResult struct {
	Mounts []mount.Info `json:"mounts"`
	Pruned []mount.Info `json:"pruned,omitempty"`
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
				if r.Pruned, err = mount.Prune(h); err != nil {
					return nil, err
				}
			}
			r.Mounts, err = mount.List(h)
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
