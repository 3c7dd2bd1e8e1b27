package proxy

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// execSpec is one process to run.
type execSpec struct {
	argv      []string
	dir       string
	env       []string
	stdin     io.Reader // nil: /dev/null
	timeout   time.Duration
	grace     time.Duration
	maxOutput int64
	extra     []*os.File // inherited as fds 3, 4, ...
	// group is the process group a timeout signals, when it is not the
	// started process's own (a sandbox's command runs in a session of
	// its own, so that its supervisor is not signalled); 0 when unknown.
	group func() int
	// stdout and stderr, when set, get the output as it comes, besides
	// what is kept (see Request.Stdout).
	stdout, stderr io.Writer
	// enter, when set, is the workspace the command must enter to see
	// (a user-namespace overlay), and cwd its --cwd there (runIn).
	enter enterer
	cwd   string
	// attr adds to the process's attributes (the namespaces an entry
	// helper starts in).
	attr func(*syscall.SysProcAttr)
}

// execResult is how the process ended and what it printed.
type execResult struct {
	exitCode         int
	signal           string
	timedOut         bool // the timeout stopped it
	interrupted      bool // the run's context ended and stopped it
	stdout, stderr   capture
	startErr         error // the program could not be started (exit code 126 or 127)
	startErrNotFound bool
}

// capture keeps the first max bytes of a stream and counts the rest, and
// passes every byte on to live, when set, as it comes. One goroutine
// writes it; it is read after that goroutine is done.
type capture struct {
	buf   []byte
	total int64
	max   int64
	live  io.Writer
}

func (c *capture) Write(p []byte) (int, error) {
	if c.live != nil {
		_, _ = c.live.Write(p) // a reader that fails loses the live copy, never the capture
	}
	c.total += int64(len(p))
	if room := c.max - int64(len(c.buf)); room > 0 {
		c.buf = append(c.buf, p[:min(int64(len(p)), room)]...)
	}
	return len(p), nil
}

func (c *capture) truncated() bool { return c.total > int64(len(c.buf)) }

// drain copies a pipe into a capture until EOF or the pipe's deadline.
// It keeps reading past the limit, so the writer never blocks on a full
// pipe.
func drain(r *os.File, c *capture, wg *sync.WaitGroup) {
	defer wg.Done()
	_, _ = io.Copy(c, r)
}

// run starts the process in its own process group and waits for it. The
// timeout, or the end of ctx (the user's Ctrl-C or SIGTERM to avfs), stops
// it the same way: SIGTERM to the group, SIGKILL after the grace period;
// whichever comes first is the reason recorded. Whatever the process
// printed before it ended is kept. Other members of the group still alive
// when it exits are killed, so a run leaves nothing behind that holds the
// mount.
func run(ctx context.Context, spec execSpec) execResult {
	res := execResult{stdout: capture{max: spec.maxOutput, live: spec.stdout}, stderr: capture{max: spec.maxOutput, live: spec.stderr}}
	outR, outW, err := os.Pipe()
	if err != nil {
		res.startErr = err
		return res
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		res.startErr = err
		return res
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go drain(outR, &res.stdout, &wg)
	go drain(errR, &res.stderr, &wg)
	finish := func() {
		outW.Close()
		errW.Close()
		// Writers that escaped the group (setsid) may hold the pipes:
		// give them the grace period, then stop reading.
		deadline := time.Now().Add(max(spec.grace, 100*time.Millisecond))
		_ = outR.SetReadDeadline(deadline)
		_ = errR.SetReadDeadline(deadline)
		wg.Wait()
		outR.Close()
		errR.Close()
	}

	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir, cmd.Env = spec.dir, spec.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.stdin, outW, errW
	cmd.ExtraFiles = spec.extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.attr != nil {
		spec.attr(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		finish()
		res.startErr = err
		res.startErrNotFound = errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
		res.exitCode = 126
		if res.startErrNotFound {
			res.exitCode = 127
		}
		msg := "avfs proxy: " + err.Error() + "\n"
		_, _ = res.stderr.Write([]byte(msg))
		return res
	}
	pgid := cmd.Process.Pid
	target := func() int {
		if spec.group != nil {
			if g := spec.group(); g > 0 {
				return g
			}
		}
		return pgid
	}
	exited := make(chan struct{})
	var timeout <-chan time.Time // nil: no limit
	if spec.timeout > 0 {
		t := time.NewTimer(spec.timeout)
		defer t.Stop()
		timeout = t.C
	}
	var mu sync.Mutex
	var timedOut, interrupted bool
	go func() {
		select {
		case <-exited:
			return
		case <-timeout:
			mu.Lock()
			timedOut = true
			mu.Unlock()
		case <-ctx.Done():
			mu.Lock()
			interrupted = true
			mu.Unlock()
		}
		_ = syscall.Kill(-target(), syscall.SIGTERM)
		g := time.NewTimer(spec.grace)
		defer g.Stop()
		select {
		case <-exited:
		case <-g.C:
			_ = syscall.Kill(-target(), syscall.SIGKILL)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	werr := cmd.Wait()
	close(exited)
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // what the command left running in its group
	finish()
	mu.Lock()
	res.timedOut, res.interrupted = timedOut, interrupted
	mu.Unlock()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		res.signal = unix.SignalName(ws.Signal())
		res.exitCode = 128 + int(ws.Signal())
	case werr != nil && cmd.ProcessState == nil:
		res.exitCode = 1
	default:
		res.exitCode = cmd.ProcessState.ExitCode()
	}
	return res
}
