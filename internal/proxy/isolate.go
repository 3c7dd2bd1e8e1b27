package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// isolationAvailable is the probe's answer for this runtime: nil when
// runs can be isolated here, else an IsolationUnavailable error. The
// bubblewrap path comes with it.
func (rt *Runtime) isolationAvailable() (string, error) {
	find := rt.Bwrap
	if find == nil {
		find = func() (string, error) { return sandbox.Bwrap(os.Getenv) }
	}
	bwrap, err := find()
	if err != nil {
		return "", err
	}
	return bwrap, sandbox.Probe(bwrap, rt.RunDir)
}

// Sandbox plans the boundary a run of req with decision d gets, with its
// workspace at mnt; approved is whether a person approved the request.
// prepare creates the missing writable dirs first (a run does; a check,
// which changes nothing, does not, and leaves them out).
// `--isolate on` where isolation is unavailable is an
// IsolationUnavailable error. `avfs policy check` shows the same plan
// before anything runs.
func (rt *Runtime) Sandbox(req Request, d policy.Decision, approved bool, mnt string, prepare bool) (*sandbox.Plan, error) {
	mode, err := sandbox.ParseMode(req.Isolate)
	if err != nil {
		return nil, err
	}
	bwrap, probe := "", error(nil)
	if mode != sandbox.Off {
		bwrap, probe = rt.isolationAvailable()
	}
	childEnv := append(append([]string{}, rt.Environ...), req.Env...)
	getenv := func(k string) string { return lookup(childEnv, k) }
	cfg := sandbox.Config{Workspace: mnt, AvfsHome: rt.Home.Dir, RunDir: rt.RunDir}
	// The secrets of the user running avfs are hidden, and those under the
	// HOME the command is given too, if it is another.
	cfg.UserHome, _ = os.UserHomeDir()
	homes := []string{cfg.UserHome}
	if h := getenv("HOME"); h != "" && h != cfg.UserHome {
		homes = append(homes, h)
	}
	var sb policy.Sandbox
	if rt.Policy != nil {
		sb = rt.Policy.Sandbox
	} else {
		sb = policy.Default().Sandbox
	}
	for _, h := range homes {
		cfg.Hide = append(cfg.Hide, sandbox.Resolve(sb.Hide, h, mnt, getenv)...)
		if h != cfg.UserHome {
			for _, s := range sandbox.DefaultSecrets {
				cfg.Hide = append(cfg.Hide, filepath.Join(h, s))
			}
		}
	}
	home := getenv("HOME")
	if home == "" {
		home = cfg.UserHome
	}
	cfg.ReadOnly = sandbox.Resolve(sb.ReadOnly, home, mnt, getenv)
	cfg.Writable = sandbox.Resolve(sb.Writable, home, mnt, getenv)
	switch {
	case approved:
		cfg.Network, cfg.NetworkWhy = true, "the host's network: a person approved this request"
	case rt.Policy.GrantsNetwork(d):
		cfg.Network, cfg.NetworkWhy = true, "the host's network: granted by rule "+d.Rule+` (network = "host")`
	default:
		cfg.NetworkWhy = `no network but its own loopback: granted only to an approved require_approval run or by a rule with network = "host"`
	}
	if prepare && probe == nil && mode != sandbox.Off {
		sandbox.Prepare(cfg.Writable)
	}
	return sandbox.New(mode, cfg, bwrap, probe)
}

// lookup is the value of key in env (KEY=VALUE entries, later ones win).
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// Mountpoint is where a run on vault mounts it when no live mount is
// reused: in the runtime dir, outside $AVFS_HOME.
func (rt *Runtime) Mountpoint(vault string, readonly bool) string {
	name := vault
	if readonly {
		name += ".ro"
	}
	return filepath.Join(rt.RunDir, "mnt", name)
}

// runIn runs spec inside the plan's boundary. When bubblewrap cannot
// build it (the command never started), --isolate auto runs the command
// without it and says so; on fails the run with IsolationUnavailable.
func (rt *Runtime) runIn(ctx context.Context, plan *sandbox.Plan, spec execSpec) (execResult, error) {
	if !plan.Isolated() {
		return runEntered(ctx, spec)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return execResult{}, &errs.Error{Kind: errs.IoError, Op: "proxy exec", Err: err}
	}
	st := readStatus(r)
	argv := spec.argv
	spec.argv, spec.extra, spec.group = plan.Wrap(argv, spec.dir, 3), []*os.File{w}, st.childPid
	res, err := runEntered(ctx, spec)
	w.Close()
	status := st.wait()
	r.Close()
	if err != nil {
		return res, err
	}
	if sandbox.Started(status) || res.startErr != nil {
		unwrapExit(&res)
		return res, nil
	}
	msg := strings.TrimSpace(strings.TrimPrefix(string(res.stderr.buf), "bwrap: "))
	sandbox.Forget(rt.RunDir)
	if plan.Isolation.Requested == string(sandbox.On) {
		return res, sandbox.Failed(msg)
	}
	plan.Fallback(msg)
	spec.argv, spec.extra, spec.group = argv, nil, nil
	return runEntered(ctx, spec)
}

// runEntered runs spec, through its workspace's entry helper when it has
// one: the helper reports on a pipe of its own (the fd after spec.extra)
// why it could not mount or enter, and that failure is the run's error;
// the command never ran.
func runEntered(ctx context.Context, spec execSpec) (execResult, error) {
	if spec.enter == nil {
		return run(ctx, spec), nil
	}
	prog, err := exec.LookPath(spec.argv[0])
	if err != nil {
		return run(ctx, spec), nil // not startable: run reports it as without the helper (126, 127)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return execResult{}, &errs.Error{Kind: errs.IoError, Op: "proxy exec", Err: err}
	}
	defer r.Close()
	argv := append([]string{prog}, spec.argv[1:]...)
	spec.argv, spec.attr = spec.enter.Enter(argv, spec.cwd, 3+len(spec.extra))
	// The working dir exists only in the mount: the helper enters it
	// there, and starts in the host's (empty) mountpoint.
	spec.dir = spec.enter.Dir()
	spec.extra = append(slices.Clip(spec.extra), w)
	res := run(ctx, spec)
	w.Close()
	setup, _ := io.ReadAll(r)
	if err := overlay.EnterFailed(setup); err != nil {
		return res, err
	}
	return res, nil
}

// unwrapExit reads what bubblewrap's exit code says of the command: it
// exits 128+N when the command was killed by signal N (as a shell
// reports it), and 1 with "bwrap: execvp" when the program could not be
// started (127 when it does not exist, as without isolation).
func unwrapExit(res *execResult) {
	switch {
	case res.signal != "":
	case res.exitCode > 128 && res.exitCode < 128+65:
		res.signal = unix.SignalName(syscall.Signal(res.exitCode - 128))
	case res.exitCode == 1 && bytes.HasPrefix(res.stderr.buf, []byte("bwrap: execvp ")):
		res.exitCode = 126
		if bytes.Contains(res.stderr.buf, []byte("No such file or directory")) {
			res.exitCode = 127
		}
	}
}

// status reads what bubblewrap writes to its status fd: first the pid of
// the sandbox's PID 1 (in this namespace), whose process group is the
// command's, and its exit code at the end.
type status struct {
	mu   sync.Mutex
	buf  []byte
	pid  int
	seen chan struct{} // closed once the pid is known or the pipe ends
	done chan struct{}
}

func readStatus(r *os.File) *status {
	st := &status{seen: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		once := sync.OnceFunc(func() { close(st.seen) })
		defer once()
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			st.mu.Lock()
			st.buf = append(st.buf, b[:n]...)
			if st.pid == 0 {
				if line, _, ok := bytes.Cut(st.buf, []byte("\n")); ok || err != nil {
					var m struct {
						ChildPid int `json:"child-pid"`
					}
					if json.Unmarshal(line, &m) == nil && m.ChildPid > 0 {
						st.pid = m.ChildPid
						once()
					}
				}
			}
			st.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return st
}

// childPid is the process group of the sandboxed command, or 0 when
// bubblewrap has not said it within a second.
func (st *status) childPid() int {
	select {
	case <-st.seen:
	case <-time.After(time.Second):
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pid
}

// wait returns everything bubblewrap wrote, once it closed the pipe (or
// a second after, when something inside still holds it).
func (st *status) wait() []byte {
	select {
	case <-st.done:
	case <-time.After(time.Second):
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return bytes.Clone(st.buf)
}
