package avfs

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
)

// ExecRequest is one command to run in a vault through the proxy. Give
// exactly one of Argv and Shell.
type ExecRequest struct {
	Vault string   // "" is the home's current vault
	Argv  []string // the program and its arguments
	Shell string   // or a script for /bin/sh -c, parsed and classified as a whole
	Cwd   string   // the working directory inside the vault; "" is "/"
	// Timeout stops the command (SIGTERM, then SIGKILL after Grace):
	// zero is DefaultTimeout, NoTimeout is no limit.
	Timeout time.Duration
	Grace   time.Duration // zero is DefaultGrace
	// ReadOnly runs on a read-only mount: no checkpoint, no changes.
	ReadOnly bool
	// Checkpoint keeps the run's pre-run checkpoint: CheckpointAuto (the
	// default, "") or CheckpointAlways keep it, CheckpointNever deletes it
	// after the change summary.
	Checkpoint CheckpointMode
	Env        []string  // KEY=VALUE added to the command's environment
	Stdin      io.Reader // nil is /dev/null
	MaxOutput  int64     // bytes of stdout and of stderr kept; zero is 1 MiB
	KeepMount  bool      // leave the mount the run starts for later runs
	// Linger leaves a mount the run starts until it has been idle that
	// long, warm for the next run (a write to the vault from elsewhere
	// ends an idle one at once): zero is $AVFS_PROXY_LINGER or
	// DefaultLinger, NoLinger unmounts after the run.
	Linger   time.Duration
	Approval string // run the request approved under this id
	// Isolate is the kernel boundary of the command: IsolateAuto (the
	// default, ""), IsolateOn or IsolateOff.
	Isolate IsolateMode
	// Transport is the run's workspace: TransportAuto (the default, "":
	// overlay where the kernel allows it, else FUSE), TransportFUSE or
	// TransportOverlay (RunResult.TransportReason says why).
	Transport TransportMode
	// Changes is how much of the change list the envelope holds:
	// ChangesFull (the default, ""), ChangesSummary or ChangesNone.
	Changes ChangesMode
	// Stdout and Stderr, when set, get the command's output while it
	// runs, as it comes, all of it (the envelope keeps MaxOutput bytes of
	// each). Each is written from its own goroutine; a failed write is
	// ignored and the run goes on.
	Stdout, Stderr io.Writer
}

// Limits of a run.
const (
	// DefaultTimeout is ExecRequest.Timeout's default.
	DefaultTimeout = 5 * time.Minute
	// DefaultGrace is ExecRequest.Grace's default: between SIGTERM and
	// SIGKILL.
	DefaultGrace = 2 * time.Second
	// NoTimeout as ExecRequest.Timeout lets the command run as long as it
	// runs.
	NoTimeout time.Duration = -1
	// DefaultLinger is ExecRequest.Linger's default.
	DefaultLinger = time.Minute
	// NoLinger as ExecRequest.Linger unmounts the run's mount after it.
	NoLinger time.Duration = -1
)

// Exec runs one command in a vault the way `avfs proxy exec` does: the
// policy classifies it; a denied command, or one that needs a person's
// approval, stops there, touching nothing. Otherwise a checkpoint of the
// state before the run is saved, the vault is mounted (a live mount of it
// is reused, else one is started by its own avfs process and unmounted
// after), the command runs in its own process group with its working
// directory in the mount (isolated: ExecRequest.Isolate), and the paths
// it changed are listed.
//
// When ctx ends (cancelled, or its deadline passed) the run stops as on a
// timeout: the command's process group gets SIGTERM, then SIGKILL after
// Grace; its changes are still listed and the run recorded, in state
// StateInterrupted, and err is an Interrupted error for which errors.Is
// finds ctx's error (context.Canceled, context.DeadlineExceeded).
//
// Every recorded run returns its envelope; the command's exit code is in
// Result.ExitCode and Success says whether it completed with 0. A command
// that fails is not an error. err is set when the run itself failed
// (Result.State "failed", with the envelope), was interrupted (with the
// envelope), or the request was refused before it was recorded (no
// envelope): VaultNotFound, InvalidInput, VaultLocked (another run holds
// the vault), FuseUnavailable, BinaryNotFound, Interrupted, or an
// Approval* kind for an unusable Approval.
func (h *Home) Exec(ctx context.Context, req ExecRequest) (*Envelope, error) {
	if req.Vault == "" {
		v, err := h.reg.Current()
		if err != nil {
			return nil, wrapErr(err)
		}
		req.Vault = v
	}
	rt, err := h.runtime(req.Vault)
	if err != nil {
		return nil, wrapErr(err)
	}
	switch {
	case req.Timeout == 0:
		req.Timeout = DefaultTimeout
	case req.Timeout < 0:
		req.Timeout = 0 // the proxy's "no limit"
	}
	if req.Grace == 0 {
		req.Grace = DefaultGrace
	}
	switch {
	case req.Linger == 0:
		if req.Linger, err = proxy.LingerFrom(os.Getenv("AVFS_PROXY_LINGER")); err != nil {
			return nil, wrapErr(err)
		}
	case req.Linger < 0:
		req.Linger = 0
	}
	env, err := rt.Exec(ctx, proxy.Request{
		Vault: req.Vault, Argv: req.Argv, Shell: req.Shell, Cwd: req.Cwd,
		Timeout: req.Timeout, Grace: req.Grace, Readonly: req.ReadOnly,
		Checkpoint: string(req.Checkpoint), Env: req.Env, Stdin: req.Stdin,
		MaxOutput: req.MaxOutput, KeepMount: req.KeepMount, Linger: req.Linger, Approval: req.Approval,
		Isolate: string(req.Isolate), Changes: string(req.Changes), Transport: string(req.Transport), Stdout: req.Stdout, Stderr: req.Stderr,
	})
	return envelope(env), wrapErr(err)
}

// Approve records a person's approval of run id, which awaits it; run it
// with ExecRequest{Approval: id}. It fails with ApprovalFromRun when called
// from inside a proxy run, and the approval counts only through the MAC it
// stores (ApprovalForged otherwise).
func (h *Home) Approve(ctx context.Context, id string) (*Envelope, error) {
	return h.decide(ctx, id, true)
}

// Reject records a person's refusal of run id.
func (h *Home) Reject(ctx context.Context, id string) (*Envelope, error) {
	return h.decide(ctx, id, false)
}

func (h *Home) decide(ctx context.Context, id string, approve bool) (*Envelope, error) {
	if err := stopped(ctx, "proxy approve"); err != nil {
		return nil, err
	}
	rt, err := h.runtime("")
	if err != nil {
		return nil, wrapErr(err)
	}
	env, err := rt.Decide(id, approve)
	return envelope(env), wrapErr(err)
}

// Undo returns vault to the state just before run id (its latest run that
// kept a checkpoint, when id is empty): an O(1) checkpoint restore. Later
// runs of the vault are undone with it. An empty vault is run id's vault,
// or the current vault when id is empty too. The vault must not be
// mounted read-write (VaultLocked). A ctx that has ended changes nothing
// (Interrupted); one that ends while a mount the runs left to linger is
// waited for stops the wait.
func (h *Home) Undo(ctx context.Context, vault, id string) (*UndoResult, error) {
	vault, rt, err := h.runRuntime(vault, id)
	if err != nil {
		return nil, wrapErr(err)
	}
	u, err := rt.Undo(ctx, vault, id)
	return undoResult(u), wrapErr(err)
}

// Redo re-applies run id, which Undo took back (the run the vault's last
// undo went back before, when id is empty): the state the run left is
// the working state again, in O(1). The vault must not have changed since
// the undo; when it did, or the run was not undone, the error is Conflict
// (errs kind "Conflict") and nothing changes. vault, mounts and ctx as
// Undo.
func (h *Home) Redo(ctx context.Context, vault, id string) (*RedoResult, error) {
	vault, rt, err := h.runRuntime(vault, id)
	if err != nil {
		return nil, wrapErr(err)
	}
	r, err := rt.Redo(ctx, vault, id)
	return redoResult(r), wrapErr(err)
}

// runRuntime is the vault Undo and Redo work on (run id's vault, or the
// current vault, when vault is empty) and its runtime.
func (h *Home) runRuntime(vault, id string) (string, *proxy.Runtime, error) {
	if vault == "" && id != "" {
		store, err := proxy.OpenStore(h.reg)
		if err != nil {
			return "", nil, err
		}
		e, err := store.Get(id)
		if err != nil {
			return "", nil, err
		}
		vault = e.Request.Vault
	} else if vault == "" {
		v, err := h.reg.Current()
		if err != nil {
			return "", nil, err
		}
		vault = v
	}
	rt, err := h.runtime(vault)
	return vault, rt, err
}

// runtime is the proxy runtime of this home for vault. Its mounts are
// started through the avfs program, as the CLI starts them.
func (h *Home) runtime(vault string) (*proxy.Runtime, error) {
	p, err := policy.Load(h.reg.Dir, vault)
	if err != nil {
		return nil, err
	}
	store, err := proxy.OpenStore(h.reg)
	if err != nil {
		return nil, err
	}
	runDir, err := proxy.RuntimeDir(h.reg.Dir, os.Getenv("XDG_RUNTIME_DIR"))
	if err != nil {
		return nil, err
	}
	ov := overlaymount.New(overlaymount.CacheDir(runDir))
	ov.Exe = func() (string, error) { return h.binary("exec") }
	ts, err := transport.NewRegistry(h.fuseTransport(), ov)
	if err != nil {
		return nil, err
	}
	return &proxy.Runtime{
		Home: h.reg, Policy: p, Store: store, RunDir: runDir,
		Transports: ts,
		Environ:    append(os.Environ(), "AVFS_HOME="+h.reg.Dir),
	}, nil
}
