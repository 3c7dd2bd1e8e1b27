// Package proxy runs one top-level command against a vault and reports
// what happened as one versioned envelope. A run is an explicit state
// machine:
//
//	request → classify → checkpoint → mount → execute → summarize → report → completed
//	              │                                │                  ↑
//	              │                                ├─ the timeout ─────┤→ timed_out
//	              │                                ╰─ ctx ends ────────┤→ interrupted
//	              ├─ deny ─────────────────────────────────────────────┤→ denied
//	              ╰─ require_approval (no approval) ───────────────────┤→ awaiting_approval
//	   ctx ends before execute ────────────────────────────────────────┤→ interrupted
//	   any stage fails ────────────────────────────────────────────────╯→ failed
//
// Each stage is timed in the envelope's stage_ms. The policy decides before
// anything is touched: a denied run and a run awaiting approval take no
// checkpoint and no mount. Every run that executes saves a checkpoint of
// the state just before it (O(1)): it is the base of the change summary
// and what `avfs proxy undo` restores. A command stopped by its timeout or
// by the end of the run's context (Ctrl-C or SIGTERM to avfs) still gets
// its summary and its record, so that undo can take back what it did. The
// command runs in a mount served by its own process, never by this one.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/sandbox"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Kinds of failure the proxy adds to package errs (part of the JSON
// contract: added to, never renamed).
const (
	// PolicyDenied is a command the policy refuses.
	PolicyDenied errs.Kind = "PolicyDenied"
	// ApprovalRequired is a command that waits for a person's approval,
	// or an --approval that is not approved yet.
	ApprovalRequired errs.Kind = "ApprovalRequired"
	// ApprovalRejected, ApprovalExpired and ApprovalUsed are --approval
	// ids that cannot run: rejected, past their expiry, or already run.
	ApprovalRejected errs.Kind = "ApprovalRejected"
	ApprovalExpired  errs.Kind = "ApprovalExpired"
	ApprovalUsed     errs.Kind = "ApprovalUsed"
	// ApprovalMismatch is an --approval given with another command, cwd or
	// vault than the one approved.
	ApprovalMismatch errs.Kind = "ApprovalMismatch"
)

// Checkpoint modes.
const (
	CheckpointAuto   = "auto"
	CheckpointAlways = "always"
	CheckpointNever  = "never"
)

// Defaults of a request.
const (
	DefaultTimeout     = 300 * time.Second
	DefaultGrace       = 2 * time.Second
	DefaultMaxOutput   = 1 << 20
	DefaultApprovalTTL = time.Hour
)

// Request is one proxy exec.
type Request struct {
	Vault      string
	Argv       []string // exactly one of Argv and Shell
	Shell      string
	Cwd        string // inside the vault; "" is its root
	Timeout    time.Duration
	Grace      time.Duration
	Readonly   bool
	Checkpoint string // auto, always, never
	Env        []string
	Stdin      io.Reader // nil: the command's stdin is /dev/null
	MaxOutput  int64
	KeepMount  bool
	// Linger leaves a read-write mount the run starts in place until it
	// has been idle that long, so the next run on the vault finds it
	// warm; a CLI write to the vault ends it at once when it is idle
	// (mount/idle.go). Zero unmounts after the run.
	Linger   time.Duration
	Approval string
	// Isolate is --isolate: auto (""), on or off (package sandbox).
	Isolate string
	// Transport names the transport of a workspace the run starts ("":
	// the runtime's default; package transport).
	Transport string
	// Changes is --changes: full (""), summary or none (changes.go).
	Changes string
	// Stdout and Stderr, when set, get the command's output while it
	// runs, as it comes, whole (the envelope keeps MaxOutput bytes of
	// each). Each is written from its own goroutine; a failed write is
	// ignored and the run goes on.
	Stdout, Stderr io.Writer
}

// DefaultLinger is how long a run's mount stays for the next run when
// $AVFS_PROXY_LINGER does not say.
const DefaultLinger = time.Minute

// LingerFrom is the linger that the value of $AVFS_PROXY_LINGER asks for:
// DefaultLinger when it is empty.
func LingerFrom(env string) (time.Duration, error) {
	if env == "" {
		return DefaultLinger, nil
	}
	d, err := time.ParseDuration(env)
	if err != nil || d < 0 {
		return 0, errs.New(errs.InvalidInput, "proxy exec", "AVFS_PROXY_LINGER wants a duration such as 30s or 0, not %q", env)
	}
	return d, nil
}

// idleTimeout is how long a mount the run starts stays after it, idle:
// read-only runs never linger (their mount would not see later writes),
// and --keep-mount keeps the mount for good instead.
func (req Request) idleTimeout() time.Duration {
	if req.KeepMount || req.Readonly {
		return 0
	}
	return req.Linger
}

// lingers reports whether the mount a run starts stays after it.
func (req Request) lingers() bool { return req.KeepMount || req.idleTimeout() > 0 }

// Runtime is what runs need from their surroundings.
type Runtime struct {
	Home   *registry.Home
	Policy *policy.Policy
	Store  *Store
	// Transports give a run's vault its workspace; a run without a live
	// mount to reuse starts one with the request's transport (its
	// default when none is named).
	Transports *transport.Registry
	// Lingering serves the host-mounted overlay workspace of a run that
	// lingers from a process of its own (package served), so that it
	// outlives the run for the next one; nil: overlay runs never linger.
	Lingering transport.Transport
	Environ   []string // the command's base environment
	// RunDir is the runtime dir of this home's mounts (RuntimeDir).
	RunDir string
	// Bwrap finds bubblewrap, or says why isolation is unavailable
	// (nil: sandbox.Bwrap with this process's environment).
	Bwrap       func() (string, error)
	Now         func() time.Time
	ApprovalTTL time.Duration
	// Getenv is this process's environment, where `proxy approve` looks
	// for the run marker (nil: os.Getenv).
	Getenv func(string) string
}

// transitions is the state machine: the states each state may move to.
var transitions = map[string][]string{
	StateRequest:    {StateClassify, StateReport},
	StateClassify:   {StateCheckpoint, StateReport},
	StateCheckpoint: {StateMount, StateReport},
	StateMount:      {StateExecute, StateReport},
	StateExecute:    {StateSummarize, StateReport},
	StateSummarize:  {StateReport},
	StateReport:     {StateCompleted, StateTimedOut, StateInterrupted, StateDenied, StateAwaitingApproval, StateFailed},
}

// machine drives one run through its states and times each stage.
type machine struct {
	env   *Envelope
	now   func() time.Time
	state string
	since time.Time
	start time.Time
	// interrupted is set when the end of the run's context stopped the
	// command or a stage.
	interrupted bool
}

// enter moves to the next state, charging the time spent to the stage
// being left. A move the table does not allow is a bug, reported as one.
func (m *machine) enter(next string) error {
	if !slices.Contains(transitions[m.state], next) {
		return &errs.Error{Kind: errs.IoError, Op: "proxy", Err: fmt.Errorf("internal error: %s → %s", m.state, next)}
	}
	t := m.now()
	m.env.Result.StageMs[m.state] += msSince(m.since, t)
	m.state, m.since = next, t
	m.env.Result.State = next
	return nil
}

func msSince(from, to time.Time) float64 { return float64(to.Sub(from).Microseconds()) / 1000 }

// aside runs fn as work of another stage than the current one (the
// unmount of a run's mount, done after its summary): its time is charged
// to stage and not to the current one.
func (m *machine) aside(stage string, fn func() error) error {
	t := m.now()
	err := fn()
	d := m.now().Sub(t)
	m.env.Result.StageMs[stage] += float64(d.Microseconds()) / 1000
	m.since = m.since.Add(d)
	return err
}

// Exec runs a request through the state machine. It returns the envelope
// of every recorded run (completed, timed out, interrupted, denied,
// awaiting approval or failed); err is set, besides the envelope, when the
// run failed, and is an Interrupted error (errors.Is context.Canceled)
// when ctx ended it. The end of ctx stops the command as its timeout
// does, and the run is still summarized and recorded. A request that is
// not valid returns only an error and is not recorded.
func (rt *Runtime) Exec(ctx context.Context, req Request) (*Envelope, error) {
	now := rt.now()
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, "proxy exec")
	}
	env, approved, err := rt.request(&req, now)
	if err != nil {
		return nil, err
	}
	m := &machine{env: env, now: rt.now, state: StateRequest, since: now, start: now}
	runErr := rt.drive(ctx, m, req, approved)
	if runErr != nil && errs.Is(runErr, errs.Interrupted) && ctx.Err() != nil {
		m.interrupted = true
	}
	if runErr != nil {
		env.Result.Error = &ErrorInfo{Error: string(errs.KindOf(runErr)), Message: runErr.Error()}
	}
	if m.state != StateReport {
		_ = m.enter(StateReport)
	}
	final := StateCompleted
	switch {
	case m.interrupted:
		final = StateInterrupted
		if runErr == nil {
			runErr = errs.Stopped(ctx, "proxy exec")
		}
	case runErr != nil:
		final = StateFailed
	case env.Result.TimedOut:
		final = StateTimedOut
	case env.Result.Decision.Action == policy.Deny:
		final = StateDenied
	case env.Result.Approval != nil && env.Result.Approval.Status == "pending":
		final = StateAwaitingApproval
	}
	env.Success = final == StateCompleted && !env.Result.TimedOut && env.Result.ExitCode != nil && *env.Result.ExitCode == 0
	// The report stage's own time is what it takes to write the record,
	// so it is measured up to the write and charged before it.
	env.Result.StageMs[StateReport] += msSince(m.since, rt.now())
	env.Result.State = final
	env.Result.DurationMs = msSince(m.start, rt.now())
	if err := rt.Store.Put(env); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return env, runErr
}

// checkCtx is the Interrupted error of a run whose context has ended
// before its next stage, else nil.
func checkCtx(ctx context.Context) error {
	if ctx.Err() != nil {
		return errs.Stopped(ctx, "proxy exec")
	}
	return nil
}

// drive runs the stages after request. It returns the error that failed
// the run, if any.
func (rt *Runtime) drive(ctx context.Context, m *machine, req Request, approved *Envelope) error {
	env := m.env
	if err := m.enter(StateClassify); err != nil {
		return err
	}
	d := rt.classify(req)
	env.Result.Decision = d
	switch {
	case d.Action == policy.Deny:
		return nil
	case d.Action == policy.RequireApproval && approved == nil:
		env.Result.Approval = &Approval{ID: env.ID, Status: "pending", ExpiresAt: rt.now().Add(rt.approvalTTL()).UTC()}
		return nil
	}
	explicit := req.Transport != "" && req.Transport != TransportAuto
	ch := rt.chooseTransport(req)
	req.Transport = ch.name
	if ch.name == transportFUSE {
		if err := mountd.Available(); err != nil { // the run needs a mount: fail before using an approval, locking or checkpointing
			return err
		}
	}
	if req.Isolate == string(sandbox.On) { // --isolate on where it cannot be: nothing is touched
		if _, err := rt.isolationAvailable(); err != nil {
			return err
		}
	}
	if approved != nil {
		a, err := rt.useApproval(approved.ID, env.ID)
		if err != nil {
			return err
		}
		env.Result.Approval = a
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	unlock, err := rt.lockVault(req.Vault)
	if err != nil {
		return err
	}
	defer unlock()

	if err := m.enter(StateCheckpoint); err != nil {
		return err
	}
	cp, live := "", ""
	var early <-chan mounted // the mount, when it starts beside the checkpoint
	if !req.Readonly {
		live = rt.liveMount(req.Vault)
		if live != "" && explicit && rt.transportOf(live) != ch.name && rt.idleMount(live) {
			// Another transport was asked for than the lingering mount's:
			// it ends (ingesting what it holds) and the run mounts anew.
			if err := mountd.EndIdle(ctx, rt.Home, req.Vault); err != nil {
				return err
			}
			live = ""
		}
		cp = CheckpointName(env.ID)
		a := checkpointArgs{Name: cp, Message: "before proxy run: " + strings.Join(env.Request.Command, " ")}
		save := func(v *vfs.Vault) error {
			_, err := v.SaveCheckpoint(a.Name, a.Message)
			return err
		}
		var err error
		// An overlay run stands on the checkpoint: it starts after it.
		if live == "" && rt.opensBeside(req.Vault) && ch.name != transportOverlay {
			// No mount to ask: start one while the checkpoint is saved
			// here. Each costs tens of milliseconds, and a checkpoint
			// is allowed beside the vault's writer.
			early = rt.mountAsync(ctx, req)
			err = rt.withVault(req.Vault, save)
		} else {
			err = rt.inVault(req.Vault, live, opCheckpoint, a, nil, save)
		}
		if err != nil {
			if early != nil {
				if r := <-early; r.err == nil && r.ws != nil && !req.lingers() {
					err = errors.Join(err, r.ws.Close(context.WithoutCancel(ctx)))
				}
			}
			return err
		}
		requested := d.Action != policy.Allow || req.Checkpoint == CheckpointAlways
		env.Result.Checkpoint = &CheckpointInfo{Name: cp, Requested: requested, Kept: req.Checkpoint != CheckpointNever}
	}

	if err := m.enter(StateMount); err != nil {
		return err
	}
	r := mounted{mnt: live, transport: rt.transportOf(live)}
	switch {
	case early != nil:
		r = <-early
	case live == "":
		if err := checkCtx(ctx); err != nil {
			return err
		}
		r = rt.mount(ctx, req)
	}
	if r.err != nil {
		return r.err
	}
	mnt := r.mnt
	env.Request.Mountpoint, env.Result.Mountpoint = &mnt, &mnt
	env.Result.Transport = &r.transport
	env.Result.MountReused = r.ws == nil
	if r.ws != nil {
		env.Result.TransportReason = &ch.reason
	}
	// An overlay workspace this process serves (none lingers: PID 0)
	// ends with the run: its close is the ingest that makes the run's
	// writes the vault's. A lingering one has a server of its own, which
	// ingests before it answers the run's checkpoint and summary.
	ingests := r.ws != nil && r.transport == transportOverlay && r.ws.Info().PID == 0
	env.Result.MountLingers = r.ws == nil || (req.lingers() && !ingests)
	stop := func() error { return nil }
	if r.ws != nil && (!req.lingers() || ingests) {
		stop = func() error {
			// The workspace is taken back even when the run was
			// interrupted: nothing of it may outlive the run.
			return m.aside(StateMount, func() error { return r.ws.Close(context.WithoutCancel(ctx)) })
		}
	}
	// An entered workspace is mounted only in the command's namespace:
	// its helper checks the working dir there.
	enter, entered := r.ws.(enterer)
	var dir string
	if entered && enter.Entered() {
		dir, err = lexicalWorkdir(mnt, req.Cwd)
	} else {
		enter = nil
		dir, err = workdir(mnt, req.Cwd)
	}
	if err == nil {
		err = checkCtx(ctx)
	}
	if err != nil {
		return errors.Join(err, stop())
	}
	plan, err := rt.Sandbox(req, d, approved != nil, mnt, true)
	if err != nil {
		_ = stop()
		return err
	}

	if err := m.enter(StateExecute); err != nil {
		return errors.Join(err, stop())
	}
	unmark, err := rt.markLive(env.ID)
	if err != nil {
		return errors.Join(err, stop())
	}
	res, err := rt.runIn(ctx, plan, execSpec{argv: env.Result.Command, dir: dir, env: rt.childEnv(req, mnt, dir),
		stdin: req.Stdin, timeout: req.Timeout, grace: req.Grace, maxOutput: req.MaxOutput,
		stdout: req.Stdout, stderr: req.Stderr, enter: enter, cwd: req.Cwd})
	unmark()
	env.Result.Isolation = &plan.Isolation
	if err != nil {
		return errors.Join(err, stop())
	}
	fill(&env.Result, &res)
	m.interrupted = res.interrupted

	if err := m.enter(StateSummarize); err != nil {
		return errors.Join(err, stop())
	}
	// The summary is taken before the unmount, from the server that
	// holds every write of the run; the unmount then only closes. An
	// overlay run is ingested first, in this stage: its writes are the
	// vault's only then.
	ask := mnt // the server to ask for the summary
	a := summarizeArgs{Checkpoint: cp, Delete: req.Checkpoint == CheckpointNever, Changes: req.Changes}
	var s summary
	summarizeFn := func(v *vfs.Vault) (err error) {
		s, err = summarizeIn(v, a)
		return err
	}
	summarized := false
	if ingests {
		var err error
		if f, ok := r.ws.(transport.Finisher); ok && cp != "" {
			// The summary in the vault the ingest has open.
			err = f.CloseWith(context.WithoutCancel(ctx), summarizeFn)
			summarized = true
		} else {
			err = r.ws.Close(context.WithoutCancel(ctx))
		}
		env.Result.Overlay = overlayInfo(r.ws)
		stop = func() error { return nil }
		if err != nil {
			return err
		}
		ask = ""
	}
	if cp != "" {
		if !summarized {
			if err := rt.inVault(req.Vault, ask, opSummarize, a, &s, summarizeFn); err != nil {
				return errors.Join(err, stop())
			}
		}
		if req.Changes != ChangesNone {
			s.shape(req.Changes, a.limit())
		}
		env.Result.Changes, env.Result.ChangedFiles, env.Result.RenamesDetected = s.Changes, s.Total, s.Renames
		env.Result.Summary, env.Result.ChangesTruncated = s.Summary, s.Truncated
		if env.Result.Changes == nil {
			env.Result.Changes = []Change{}
		}
	}
	if !ingests && r.transport == transportOverlay && env.Result.MountLingers && rt.idleMount(mnt) && rt.overBound(mnt) {
		// Ended now, the upper is ingested once more and adopted into the
		// layer cache: the next run materializes nothing.
		if err := m.aside(StateMount, func() error {
			_, err := mountd.Unmount(context.WithoutCancel(ctx), rt.Home, mnt, mountd.UnmountOptions{})
			return err
		}); err == nil {
			env.Result.MountLingers = false
		}
	}
	return stop()
}

// A lingering overlay workspace stats its whole upper at every ingest
// (each run's checkpoint and summary: overlay.Run.PersistOnto), so once
// its upper holds more than this the run ends it instead of leaving it.
// Measured (docs/architecture.md): the checkpoint and summary of a run
// that changes one file of a lingering upper of 990 entries take 13-24
// ms, 3-9 ms over an empty one; about 12 ms more is what lingering saves
// (the unmount, 5-11 ms, a mount and a cold dentry cache). The end ingests whatever the upper holds at once,
// and the upper lives in the runtime dir (often tmpfs): 64 MiB, the FUSE
// server's write-back budget, bounds that.
const (
	LingerMaxEntries = 1000
	LingerMaxBytes   = 64 << 20
)

// overBound reports whether the upper of the overlay workspace at mnt
// holds more than a lingering one may (LingerMaxEntries,
// LingerMaxBytes); a server that cannot say is not over it.
func (rt *Runtime) overBound(mnt string) bool {
	u, err := mountd.WorkspaceUpper(rt.Home, mnt)
	return err == nil && (u.Entries > LingerMaxEntries || u.Bytes > LingerMaxBytes)
}

// idleMount reports whether the live mount at mnt was started with an
// idle timeout (a run's lingering mount): a CLI write or another
// transport asked for ends it.
func (rt *Runtime) idleMount(mnt string) bool {
	in, ok := mountrec.Find(rt.Home, mnt)
	return ok && in.IdleTimeoutMS > 0
}

// withVault opens the vault for one step and closes it after. The proxy
// never keeps it open across the mount: an engine that locks its file
// (bbolt) would keep the mount's server out.
func (rt *Runtime) withVault(name string, fn func(*vfs.Vault) error) error {
	v, err := rt.Home.Open(name)
	if err != nil {
		return err
	}
	defer v.Close()
	return fn(v)
}

func (rt *Runtime) now() time.Time {
	if rt.Now != nil {
		return rt.Now()
	}
	return time.Now()
}

func (rt *Runtime) approvalTTL() time.Duration {
	if rt.ApprovalTTL > 0 {
		return rt.ApprovalTTL
	}
	return DefaultApprovalTTL
}

// fill copies an execution's outcome into the result.
func fill(r *Result, res *execResult) {
	code := res.exitCode
	r.ExitCode = &code
	if res.signal != "" {
		s := res.signal
		r.Signal = &s
	}
	r.TimedOut = res.timedOut
	r.Stdout, r.Stderr = string(res.stdout.buf), string(res.stderr.buf)
	r.StdoutBytes, r.StderrBytes = res.stdout.total, res.stderr.total
	r.StdoutTruncated, r.StderrTruncated = res.stdout.truncated(), res.stderr.truncated()
}

// childEnv is the command's environment: the runtime's, the run's own
// variables, then --env, later entries winning. Nothing in it differs
// between two runs of one vault (the run's id is in the envelope, not
// here), so tools that key a cache on their environment, as `go test`
// does, hit it again on the next run.
func (rt *Runtime) childEnv(req Request, mnt, dir string) []string {
	env := slices.Clone(rt.Environ)
	env = append(env, "AVFS_VAULT="+req.Vault, "AVFS_MOUNTPOINT="+mnt, RunMarker+"="+req.Vault, "PWD="+dir)
	return append(env, req.Env...)
}

// workdir is the command's working directory: cwd inside the mount,
// which must be a directory and, symlinks resolved, still in the mount.
func workdir(mnt, cwd string) (string, error) { return overlay.Workdir(mnt, cwd) }

// lexicalWorkdir is cwd inside mnt without looking at it (overlay.Workdir
// checks it once the mount is there); a cwd that climbs out is refused.
func lexicalWorkdir(mnt, cwd string) (string, error) {
	dir := filepath.Join(mnt, filepath.FromSlash(cwd))
	if dir != mnt && !strings.HasPrefix(dir, mnt+"/") {
		return "", &errs.Error{Kind: errs.InvalidPath, Op: "proxy exec", Path: cwd, Err: fmt.Errorf("--cwd leads outside the mount, to %s", dir)}
	}
	return dir, nil
}

// mount finds a live mount of the vault to reuse (read-write, or
// read-only for a read-only request) or starts a workspace in the runtime
// dir (rt.Mountpoint) with the request's transport. ws is set when this
// run started it.
func (rt *Runtime) mount(ctx context.Context, req Request) mounted {
	fail := func(err error) mounted { return mounted{err: err} }
	infos, err := mountrec.List(rt.Home)
	if err != nil {
		return fail(err)
	}
	stale := false
	for _, in := range infos {
		if in.Vault != req.Vault || in.ReadOnly != req.Readonly {
			continue
		}
		if in.Live && servesDir(in) {
			return mounted{mnt: in.Mountpoint, transport: in.Transport}
		}
		stale = stale || !in.Live
	}
	if stale {
		_, _ = mountrec.Prune(rt.Home)
	}
	if rt.RunDir == "" || rt.Transports == nil {
		return fail(&errs.Error{Kind: errs.IoError, Op: "proxy mount", Err: fmt.Errorf("internal error: no runtime dir or transports")})
	}
	t, err := rt.Transports.Get(req.Transport)
	if err != nil {
		return fail(err)
	}
	if u, ok := t.(userNamespacer); t.Name() == transportOverlay && req.idleTimeout() > 0 && rt.Lingering != nil && (!ok || !u.UserNamespace()) {
		// Mounted on the host, the overlay can outlive the run when a
		// process of its own holds it; a user namespace's cannot.
		t = rt.Lingering
	}
	mnt := rt.Mountpoint(req.Vault, req.Readonly)
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return fail(&errs.Error{Kind: errs.IoError, Op: "proxy mount", Path: mnt, Err: err})
	}
	if mountrec.IsAvfsMount(mnt) {
		// A mount the records do not know (a crashed server): detach it.
		_ = mountrec.Unmount(mnt, true)
	}
	if real, err := filepath.EvalSymlinks(mnt); err == nil {
		mnt = real
	}
	spec := transport.Spec{Home: rt.Home, Vault: req.Vault, Dir: mnt, ReadOnly: req.Readonly,
		IdleTimeout: req.idleTimeout(), OneRun: true}
	if !req.lingers() {
		// Tied to this process: the workspace ends when it exits, even
		// if the run is killed before it can take it back.
		spec.OwnerPID = os.Getpid()
	}
	ws, err := t.Start(ctx, spec)
	if err != nil {
		return fail(err)
	}
	return mounted{mnt: ws.Dir(), ws: ws, transport: t.Name()}
}

// mounted is the outcome of rt.mount.
type mounted struct {
	mnt       string
	ws        transport.Workspace // the workspace this run started (nil: reused)
	transport string              // the transport that serves mnt
	err       error
}

// mountAsync runs rt.mount in the background.
func (rt *Runtime) mountAsync(ctx context.Context, req Request) <-chan mounted {
	ch := make(chan mounted, 1)
	go func() { ch <- rt.mount(ctx, req) }()
	return ch
}

// transportOf names the transport serving the live mount at mnt. A
// mount whose record is gone (its server ending) was found in the
// kernel's table as an avfs FUSE mount (liveMount).
func (rt *Runtime) transportOf(mnt string) string {
	if in, ok := mountrec.Find(rt.Home, mnt); ok {
		return in.Transport
	}
	return mountrec.FUSE
}

// opensBeside reports whether vault can be opened here while a mount's
// server opens it too: engines whose files are shared between processes
// (SQLite) can; one that locks its file (bbolt) cannot.
func (rt *Runtime) opensBeside(vault string) bool {
	caps, err := rt.Home.Caps(vault)
	return err == nil && caps.SharedOpen
}

// summarize lists the changes since the run's checkpoint, renames paired
// as `avfs diff` pairs them (vfs.ContentDiff: same chunk hashes, else
// similar lines), not by inode: an overlay ingest makes a moved file a
// new inode, so only content tells both transports' moves apart alike.
func summarize(v *vfs.Vault, cp string) ([]Change, bool, error) {
	diff, _, err := vfs.ContentDiff(vfs.StateRef{Vault: v, Checkpoint: cp}, vfs.StateRef{Vault: v}, false)
	if err != nil {
		return nil, false, err
	}
	out := make([]Change, 0, len(diff))
	renamed := false
	for _, c := range diff {
		ch := Change{Path: c.Path, Kind: string(c.Kind), Type: c.Type, SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter}
		if c.Kind == vfs.Renamed {
			from := c.From
			ch.From, renamed = &from, true
		}
		out = append(out, ch)
	}
	return out, renamed, nil
}
