package mountd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// Request is a mount to serve from its own process.
type Request struct {
	Home       *registry.Home
	Vault      string
	Mountpoint string // absolute, symlinks resolved
	ReadOnly   bool
	// OwnerPID ends the mount when that process exits (0: none).
	OwnerPID int
	// IdleTimeout ends the mount after this long unused (0: never).
	IdleTimeout time.Duration
	// Transport is what the process serves ("" or "fuse": a FUSE mount;
	// another name: that transport's workspace, ServeWorkspace).
	Transport string
	// Progress hears what the process reports of its start while it
	// prepares (an overlay's first materializing), nil: nobody asks.
	Progress func(done, total int)
}

// ReadyTimeout bounds the wait for a serving process to report the mount
// ready, or, while it prepares, the next sign that it moves on: an
// overlay's first run on a large vault materializes for longer.
const ReadyTimeout = 30 * time.Second

// readyMsg is what a serving process reports on its ready pipe, JSON
// lines: any number of progress reports, then that the mount is ready,
// or why it failed.
type readyMsg struct {
	Ready    bool       `json:"ready"`
	PID      int        `json:"pid"`
	Failure  *wireError `json:"failure,omitempty"`
	Progress *progress  `json:"progress,omitempty"`
}

// progress is a report of a start under way: names written of about
// total.
type progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Start runs `exe mount --foreground --ready-fd 3 …` in a new session,
// its output appended to the mount's log, and returns its pid once it
// reports the mount ready. The server outlives this process by design
// (go-fuse documents deadlocks when one process both serves a mount and
// uses it); OwnerPID ties it to a process. A server that reports a
// failure gives its typed error; one that reports nothing within
// ReadyTimeout is killed and the error is MountFailed. When ctx ends
// first, the server gets SIGTERM (it unmounts, if it got that far, and
// exits) and the error is Interrupted.
func Start(ctx context.Context, exe string, r Request) (int, error) {
	h := r.Home
	logPath, err := mountrec.LogPath(h, r.Mountpoint)
	if err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, &errs.Error{Kind: errs.IoError, Op: "mount", Path: logPath, Err: err}
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
	}
	defer pr.Close()
	args := []string{"mount", "--foreground", "--ready-fd", "3", "--home", h.Dir, r.Vault, r.Mountpoint}
	if r.ReadOnly {
		args = append(args, "--readonly")
	}
	if r.OwnerPID > 0 {
		args = append(args, "--owner-pid", strconv.Itoa(r.OwnerPID))
	}
	if r.Transport != "" && r.Transport != mountrec.FUSE {
		args = append(args, "--transport", r.Transport)
	}
	if r.IdleTimeout > 0 {
		args = append(args, "--idle-timeout", r.IdleTimeout.String())
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = append(os.Environ(), h.Env()...)
	if err := cmd.Start(); err != nil {
		pw.Close()
		return 0, &errs.Error{Kind: errs.IoError, Op: "mount", Err: err}
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
		msg, err := readReady(pr, ReadyTimeout, r.Progress)
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
		case <-time.After(ReadyTimeout):
			_ = cmd.Process.Kill()
		}
		return 0, errs.Stopped(ctx, "mount")
	}
	if err == nil && !msg.Ready {
		err = &errs.Error{Kind: MountFailed, Op: "mount", Path: r.Mountpoint,
			Err: errors.New("the serving process reported a failure without saying why")}
		if msg.Failure != nil {
			err = msg.Failure.err()
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
		return 0, err
	}
	return msg.PID, nil
}

// readReady reads the serving process's report, passing its progress
// reports to progress (when not nil); each one gives it timeout more.
func readReady(r *os.File, timeout time.Duration, progress func(done, total int)) (readyMsg, error) {
	br := bufio.NewReader(r)
	for {
		_ = r.SetReadDeadline(time.Now().Add(timeout))
		var msg readyMsg
		line, err := br.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &msg)
		}
		if err != nil {
			return msg, &errs.Error{Kind: MountFailed, Op: "mount",
				Err:  fmt.Errorf("the serving process did not report the mount ready: %v", err),
				Hint: "see the mount's log under $AVFS_HOME/mounts/"}
		}
		if msg.Progress == nil {
			return msg, nil
		}
		if progress != nil {
			progress(msg.Progress.Done, msg.Progress.Total)
		}
	}
}

// Reporter is the serving process's end of the ready pipe: it reports
// progress while the mount starts, then once that it is ready or why it
// failed, and closes the pipe.
// A nil Reporter (a server started by hand) reports nothing.
type Reporter struct{ f *os.File }

// NewReporter reports on file descriptor fd (0: nowhere).
func NewReporter(fd int) *Reporter {
	if fd <= 0 {
		return nil
	}
	return &Reporter{f: os.NewFile(uintptr(fd), "ready")}
}

// Ready reports the mount served by this process.
func (r *Reporter) Ready() { r.send(readyMsg{Ready: true, PID: os.Getpid()}) }

// Progress reports a start under way (an overlay.Progress), and keeps
// the pipe open for the report that ends it.
func (r *Reporter) Progress(done, total int) {
	if r == nil || r.f == nil {
		return
	}
	b, _ := json.Marshal(readyMsg{Progress: &progress{Done: done, Total: total}})
	_, _ = r.f.Write(append(b, '\n'))
}

// Fail reports why the mount failed, typed.
func (r *Reporter) Fail(err error) { r.send(readyMsg{Failure: toWire(err)}) }

// Close closes the pipe if nothing was reported.
func (r *Reporter) Close() {
	if r != nil && r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

func (r *Reporter) send(m readyMsg) {
	if r == nil || r.f == nil {
		return
	}
	b, _ := json.Marshal(m)
	_, _ = r.f.Write(append(b, '\n'))
	r.Close()
}
