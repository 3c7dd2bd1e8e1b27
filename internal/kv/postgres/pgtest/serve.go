package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// dirPattern names the temporary directories of servers (os.MkdirTemp).
const dirPattern = "avfs-pg"

// ownerFile, in a server's directory, names the process that started it:
// its pid and its start time (so a pid reused by another process is not
// taken for the starter).
const ownerFile = "owner"

// serve runs the postmaster as this process's child, with a parent-death
// signal: when the test binary dies (a timeout's panic, a SIGKILL), the
// kernel sends the postmaster SIGQUIT, PostgreSQL's immediate shutdown.
// pg_ctl start would daemonise it out of reach. The signal is sent when
// the thread that started the child ends, not the process: the child is
// started from a goroutine locked to its thread, which lives until the
// postmaster exits. It returns once the server accepts connections.
func (s *Server) serve(data string, opts Options) error {
	args := []string{"-D", data, "-k", s.Socket, "-c", "listen_addresses=", "-c", "max_connections=300"}
	if opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a test's Ctrl-C must not reach the server
	// before Stop does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGQUIT, Credential: s.cred}
	started := make(chan error, 1)
	s.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		defer close(s.exited)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-s.exited:
			out, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("postgres exited at start: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			<-s.exited
			out, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("postgres not ready after 30 s: %v: %s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeOwner records this process as the starter of the server in dir.
func writeOwner(dir string) error {
	st, err := startTime(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %d\n", os.Getpid(), st), 0o644)
}

// startTime is process pid's start time, in clock ticks since boot
// (/proc/PID/stat, field 22).
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ownerAlive reports whether the process an owner file names still runs.
func ownerAlive(owner []byte) bool {
	var pid int
	var st uint64
	if _, err := fmt.Sscan(string(owner), &pid, &st); err != nil || pid <= 0 {
		return true // not ours to judge: leave it
	}
	now, err := startTime(pid)
	return err == nil && now == st
}

// sweepOrphans stops and removes the servers under the temporary
// directory whose starter has died. A directory without an owner file
// (an older pgtest's, maybe still running) is left alone.
func sweepOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil || ownerAlive(owner) {
			continue
		}
		stopOrphan(dir)
		os.RemoveAll(dir)
	}
}

// stopOrphan kills the postmaster of the server in dir, if it runs, and
// waits for it to go.
func stopOrphan(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return
	}
	// The pid is the postmaster's only if its data directory is dir's.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), filepath.Join(dir, "data")) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	for range 500 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
