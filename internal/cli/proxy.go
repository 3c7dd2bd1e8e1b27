package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/sandbox"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/transport/served"
)

// Exit codes of proxy exec that are not the command's own (see ExitCodes).
const (
	exitDenied   = 14
	exitApproval = 15
	exitTimedOut = 124
)

// exitStatus ends a command with an exit code after it printed its result
// (proxy exec passes on the command's exit code).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func (a *app) proxyCmd() *cobra.Command {
	return a.group("proxy", "Run commands in a vault through the policy-gated proxy",
		a.proxyExecCmd(), a.proxyHistoryCmd(), a.proxyShowCmd(),
		a.proxyDecideCmd("approve", true), a.proxyDecideCmd("reject", false), a.proxyUndoCmd(), a.proxyRedoCmd())
}

// proxyStore opens the home and its record of proxy runs.
func (a *app) proxyStore() (*registry.Home, *proxy.Store, error) {
	h, err := a.home()
	if err != nil {
		return nil, nil, err
	}
	store, err := proxy.OpenStore(h)
	return h, store, err
}

// proxyRuntime is the proxy runtime of this run of avfs, for vault.
func (a *app) proxyRuntime(h *registry.Home, vault string) (*proxy.Runtime, error) {
	p, err := policy.Load(h.Dir, vault)
	if err != nil {
		return nil, err
	}
	store, err := proxy.OpenStore(h)
	if err != nil {
		return nil, err
	}
	runDir, err := proxy.RuntimeDir(h.Dir, a.env.Getenv("XDG_RUNTIME_DIR"))
	if err != nil {
		return nil, err
	}
	ov := overlaymount.New(overlaymount.CacheDir(runDir))
	ov.Exe = a.helperExecutable
	ts, err := transport.NewRegistry(a.fuseTransport(), ov)
	if err != nil {
		return nil, err
	}
	return &proxy.Runtime{
		Home: h, Policy: p, Store: store, RunDir: runDir,
		Bwrap:      func() (string, error) { return sandbox.Bwrap(a.env.Getenv) },
		Transports: ts,
		Lingering:  served.New(transport.Overlay, a.mountExecutable, ov.Available),
		// Not the store's address: it may hold the database's password.
		Environ: append(slices.DeleteFunc(os.Environ(), func(e string) bool {
			return strings.HasPrefix(e, registry.StoreEnv+"=")
		}), "AVFS_HOME="+h.Dir),
	}, nil
}

func (a *app) proxyExecCmd() *cobra.Command {
	var req proxy.Request
	var stdin, stream bool
	c := &cobra.Command{
		Use:   "exec [flags] (--shell SCRIPT | -- ARGV...)",
		Short: "Classify, checkpoint, mount, run one command and report what it changed",
		Long: `Run one top-level command in the vault: the policy classifies it first
(allow, allow_with_checkpoint, deny, require_approval) and a denied command
touches nothing. Otherwise a checkpoint of the state before the run is
saved, the vault is mounted (a live read-write mount of it is reused; else
one is started), the command runs in its own process group with its cwd in
the mount, and the changes it made are listed.

A mount the run starts stays for the next run until it has been idle for
--linger (default 1m, or $AVFS_PROXY_LINGER), so runs after the first skip
mounting; a CLI write to the vault, or a read-write mount of it, ends an
idle one at once. --linger 0 unmounts after the run; --keep-mount keeps
the mount until ` + "`avfs unmount`" + `.

The result is one JSON envelope (docs/schema/proxy-exec.json), printed with
--json and whenever stdout is not a terminal. On a terminal without --json
the command's stdout and stderr pass through as they come, then a one-line
summary goes to stderr. --stream prints JSON Lines instead
(docs/schema/proxy-exec-stream.json): {"event":"stdout","data":...} and
{"event":"stderr","data":...} as the output comes, then
{"event":"result","envelope":{...}}, or {"event":"error","error":{...}} for
a run that failed; the envelope still holds the output within --max-output. The exit code is the
command's, or 14 when the policy denied it, 15 when it awaits approval,
124 when it timed out (state timed_out), 130 when SIGINT or SIGTERM to
avfs stopped it (state interrupted): the command's process group gets
SIGTERM, then SIGKILL after --grace, and the envelope is still printed
and kept, its changes listed. Require_approval is a real flow: a person runs
` + "`avfs proxy approve ID`" + `, then ` + "`avfs proxy exec --approval ID`" + ` runs exactly
that request, once. Two runs on one vault do not queue: the second fails
with VaultLocked.

--isolate (default auto) runs the command in fresh user, mount, PID, IPC,
UTS and network namespaces (bubblewrap): the host's root read-only, the
workspace and the [sandbox] writable dirs (Go's and npm's caches by
default) writable, /tmp private, $AVFS_HOME, the runtime dir of the
mounts and the user's secrets hidden, no network unless the request was
approved or a rule says network = "host". auto runs without namespaces
where the host cannot make them, and says so in result.isolation; on
refuses then (IsolationUnavailable, exit 17) before anything is touched.`,
		Args: cobra.ArbitraryArgs,
		PreRun: func(*cobra.Command, []string) {
			if stream {
				a.jsonOut, a.streamLines = true, true
			}
		},
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if req.MaxOutput < 1 {
				return nil, invalidf("proxy exec", "--max-output must be a positive number of bytes, not %d", req.MaxOutput)
			}
			if req.Linger < 0 {
				return nil, invalidf("proxy exec", "--linger must be 0 (unmount after the run) or positive, not %v", req.Linger)
			}
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			if req.Vault, err = a.vaultName(h); err != nil {
				return nil, err
			}
			if len(args) > 0 && req.Shell != "" {
				return nil, usageErrorf("give --shell or an argv after --, not both")
			}
			req.Argv = args
			if stdin {
				req.Stdin = a.env.Stdin
			}
			if !cmd.Flags().Changed("timeout") {
				req.Timeout = proxy.DefaultTimeout
			}
			if !cmd.Flags().Changed("isolate") {
				req.Isolate = "" // auto, or what an --approval was approved with
			}
			if !cmd.Flags().Changed("linger") {
				if req.Linger, err = proxy.LingerFrom(a.env.Getenv("AVFS_PROXY_LINGER")); err != nil {
					return nil, err
				}
			}
			rt, err := a.proxyRuntime(h, req.Vault)
			if err != nil {
				return nil, err
			}
			if req.Transport != proxy.TransportAuto && !slices.Contains(rt.Transports.Names(), req.Transport) {
				return nil, invalidf("proxy exec", "--transport wants auto, %s, not %q", strings.Join(rt.Transports.Names(), ", "), req.Transport)
			}
			if !a.jsonOut && !a.env.IsTerminal(a.env.Stdout) {
				a.jsonOut = true
			}
			live := !a.jsonOut
			var events *eventWriter
			switch {
			case a.streamLines:
				events = &eventWriter{w: a.env.Stdout}
				req.Stdout, req.Stderr = events.stream("stdout"), events.stream("stderr")
			case live:
				req.Stdout, req.Stderr = a.env.Stdout, a.env.Stderr
			}
			env, err := rt.Exec(a.materializing(a.ctx), req)
			if events != nil {
				events.flush()
			}
			if env == nil || env.Result.State == proxy.StateFailed {
				if err == nil {
					err = &errs.Error{Kind: errs.IoError, Op: "proxy exec", Err: fmt.Errorf("run failed")}
				}
				return nil, err
			}
			if events != nil {
				events.line(map[string]any{"event": "result", "envelope": env})
			} else {
				a.emitRun(env, live)
			}
			return nil, execExit(env)
		}),
	}
	f := c.Flags()
	f.SetInterspersed(false)
	f.StringVar(&req.Shell, "shell", "", "run this shell script (parsed and classified as a whole) with /bin/sh -c")
	f.StringVar(&req.Cwd, "cwd", "/", "working directory inside the vault")
	f.DurationVar(&req.Timeout, "timeout", proxy.DefaultTimeout, "stop the command after this long (SIGTERM, then SIGKILL); 0 = no limit")
	f.DurationVar(&req.Grace, "grace", proxy.DefaultGrace, "time between SIGTERM and SIGKILL on timeout or interruption")
	f.BoolVar(&req.Readonly, "readonly", false, "run on a read-only mount (no checkpoint, no changes)")
	f.StringVar(&req.Checkpoint, "checkpoint", proxy.CheckpointAuto, "keep a checkpoint of the state before the run: auto, always or never")
	f.StringArrayVar(&req.Env, "env", nil, "set KEY=VALUE in the command's environment (repeatable)")
	f.BoolVar(&stdin, "stdin", false, "pass this process's stdin to the command (default: /dev/null)")
	f.Int64Var(&req.MaxOutput, "max-output", proxy.DefaultMaxOutput, "bytes of stdout and of stderr kept in the envelope")
	f.BoolVar(&req.KeepMount, "keep-mount", false, "leave the mount this run starts in place for later runs")
	f.DurationVar(&req.Linger, "linger", proxy.DefaultLinger, "leave the mount this run starts until idle this long, warm for the next run (0: unmount after the run; default from $AVFS_PROXY_LINGER)")
	f.StringVar(&req.Approval, "approval", "", "run the request approved under this id")
	f.StringVar(&req.Isolate, "isolate", string(sandbox.Auto), "kernel isolation of the command: auto, on or off")
	f.StringVar(&req.Changes, "changes", proxy.ChangesFull, fmt.Sprintf("how much of the change list the envelope carries: full (up to %d entries, then cut: changes_truncated), summary (result.summary only) or none (no diff is taken)", proxy.ChangesLimit))
	f.StringVar(&req.Transport, "transport", proxy.TransportAuto, "workspace of the run: auto (overlay where the kernel allows it, else fuse), fuse or overlay")
	f.BoolVar(&stream, "stream", false, "print JSON Lines: the output as it comes, then the envelope (implies --json)")
	return c
}

// execExit is the exit status of a run.
func execExit(env *proxy.Envelope) error {
	code := 0
	switch {
	case env.Result.State == proxy.StateDenied:
		code = exitDenied
	case env.Result.State == proxy.StateAwaitingApproval:
		code = exitApproval
	case env.Result.State == proxy.StateInterrupted:
		code = exitCode(errs.Interrupted)
	case env.Result.TimedOut:
		code = exitTimedOut
	case env.Result.ExitCode != nil:
		code = *env.Result.ExitCode
	}
	if code == 0 {
		return nil
	}
	return exitStatus(code)
}

// execResult prints an envelope: as JSON, or for people the command's own
// output (unless it went through live) and a summary on stderr.
type execResult struct {
	env    *proxy.Envelope
	stderr io.Writer
	live   bool // the output was passed through as it came
}

// emitRun prints an envelope: the envelope itself as JSON, else in its
// form for people.
func (a *app) emitRun(env *proxy.Envelope, live bool) {
	if a.jsonOut {
		a.emit(env)
		return
	}
	a.emit(execResult{env: env, stderr: a.env.Stderr, live: live})
}

func (r execResult) human(w io.Writer) {
	res := r.env.Result
	if !r.live {
		io.WriteString(w, res.Stdout)
		io.WriteString(r.stderr, res.Stderr)
	}
	d := res.Decision
	switch res.State {
	case proxy.StateDenied:
		fmt.Fprintf(r.stderr, "avfs proxy: denied (%s): %s\n", d.Rule, d.Reason)
		return
	case proxy.StateAwaitingApproval:
		fmt.Fprintf(r.stderr, "avfs proxy: needs approval (%s): %s\napprove with `avfs proxy approve %s`, then run `avfs proxy exec --approval %s` (expires %s)\n",
			d.Rule, d.Reason, res.Approval.ID, res.Approval.ID, res.Approval.ExpiresAt.Format(time.RFC3339))
		return
	}
	status := fmt.Sprintf("exit %d", deref(res.ExitCode))
	switch {
	case res.State == proxy.StateInterrupted && res.ExitCode == nil:
		status = "interrupted before the command ran"
	case res.State == proxy.StateInterrupted:
		status = "interrupted, " + status
	case res.TimedOut:
		status = "timed out, " + status
	}
	changed := fmt.Sprintf("%d changed file(s)", res.ChangedFiles)
	if res.Summary == nil {
		changed = "changes not listed (--changes none)"
	}
	fmt.Fprintf(r.stderr, "avfs proxy: run %s: %s in %.1f ms, %s", r.env.ID, status, res.DurationMs, changed)
	if res.Checkpoint != nil && res.Checkpoint.Kept {
		fmt.Fprintf(r.stderr, ", undo with `avfs proxy undo %s`", r.env.ID)
	}
	fmt.Fprintln(r.stderr)
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// historyResult is the JSON of proxy history.
type historyResult struct {
	SchemaVersion int          `json:"schema_version"`
	Kind          string       `json:"kind"`
	Runs          []runSummary `json:"runs"`
}

type runSummary struct {
	ID           string    `json:"id"`
	CreatedAt    time.Time `json:"created_at"`
	Vault        string    `json:"vault"`
	Command      []string  `json:"command"`
	State        string    `json:"state"`
	Action       string    `json:"action"`
	ExitCode     *int      `json:"exit_code"`
	TimedOut     bool      `json:"timed_out"`
	ChangedFiles int       `json:"changed_files"`
	DurationMs   float64   `json:"duration_ms"`
	UndoneBy     *string   `json:"undone_by"`
}

func (r historyResult) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVAULT\tSTATE\tEXIT\tCHANGES\tCOMMAND")
	for _, s := range r.Runs {
		exit := "-"
		if s.ExitCode != nil {
			exit = fmt.Sprint(*s.ExitCode)
		}
		state := s.State
		if s.UndoneBy != nil {
			state += " (undone)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, s.Vault, state, exit, s.ChangedFiles, strings.Join(s.Command, " "))
	}
	tw.Flush()
}

func (a *app) proxyHistoryCmd() *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:   "history",
		Short: "List the proxy runs kept under $AVFS_HOME/proxy/runs (of --vault, if given)",
		Args:  noArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if limit < 0 {
				return nil, invalidf("proxy history", "--limit must be 0 (all runs) or positive, not %d", limit)
			}
			_, store, err := a.proxyStore()
			if err != nil {
				return nil, err
			}
			runs, err := store.List(a.vaultFlag)
			if err != nil {
				return nil, err
			}
			if limit > 0 && len(runs) > limit {
				runs = runs[len(runs)-limit:]
			}
			r := historyResult{SchemaVersion: proxy.SchemaVersion, Kind: "proxy_history", Runs: []runSummary{}}
			for _, e := range runs {
				r.Runs = append(r.Runs, runSummary{ID: e.ID, CreatedAt: e.CreatedAt, Vault: e.Request.Vault,
					Command: e.Request.Command, State: e.Result.State, Action: string(e.Result.Decision.Action),
					ExitCode: e.Result.ExitCode, TimedOut: e.Result.TimedOut, ChangedFiles: e.Result.ChangedFiles,
					DurationMs: e.Result.DurationMs, UndoneBy: e.Result.UndoneBy})
			}
			return r, nil
		}),
	}
	c.Flags().IntVar(&limit, "limit", 0, "show only the latest N runs (0: all)")
	return c
}

func (a *app) proxyShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Print the envelope of a proxy run",
		Args:  exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			_, store, err := a.proxyStore()
			if err != nil {
				return nil, err
			}
			e, err := store.Get(args[0])
			if err != nil {
				return nil, err
			}
			a.emitRun(e, false)
			return nil, nil
		}),
	}
}

// approvalResult is the JSON of proxy approve and proxy reject.
type approvalResult struct {
	SchemaVersion int             `json:"schema_version"`
	Kind          string          `json:"kind"`
	ID            string          `json:"id"`
	Vault         string          `json:"vault"`
	Cwd           string          `json:"cwd"`
	Command       []string        `json:"command"`
	Approval      *proxy.Approval `json:"approval"`
}

func (r approvalResult) human(w io.Writer) {
	fmt.Fprintf(w, "%s %s: %s\n", r.Approval.Status, r.ID, strings.Join(r.Command, " "))
	if r.Approval.Status == "approved" {
		fmt.Fprintf(w, "run it with `avfs proxy exec --approval %s` before %s\n", r.ID, r.Approval.ExpiresAt.Format(time.RFC3339))
	}
}

func (a *app) proxyDecideCmd(verb string, approve bool) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: map[bool]string{true: "Approve a proxy run that awaits approval", false: "Reject a proxy run that awaits approval"}[approve],
		Long: `A person's answer to a run awaiting approval. It is refused with
ApprovalFromRun when called from inside a proxy run ($AVFS_PROXY_RUN set, or
an ancestor process running a proxy command). An approval is bound to its
request (id, vault, cwd, command, expiry) by an HMAC under
$AVFS_HOME/keys/approval.key (created 0600 on first use), or in a home on a
store under the store's key (its table avfs_proxy, shared by every host); a
record edited or written on disk never counts as one (ApprovalForged).`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, store, err := a.proxyStore()
			if err != nil {
				return nil, err
			}
			rt := &proxy.Runtime{Home: h, Store: store, Getenv: a.env.Getenv}
			e, err := rt.Decide(args[0], approve)
			if err != nil {
				return nil, err
			}
			return approvalResult{SchemaVersion: proxy.SchemaVersion, Kind: "proxy_approval", ID: e.ID, Vault: e.Request.Vault,
				Cwd: e.Request.Cwd, Command: e.Request.Command, Approval: e.Result.Approval}, nil
		}),
	}
}

type undoResult struct{ *proxy.UndoResult }

func (r undoResult) human(w io.Writer) {
	fmt.Fprintf(w, "restored %s to the state before run %s (checkpoint %s)\n", r.Vault, r.Run, r.Checkpoint)
	for _, id := range r.Undone {
		fmt.Fprintf(w, "undone: %s\n", id)
	}
}

func (a *app) proxyUndoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "undo [ID]",
		Short: "Return the vault to the state just before a proxy run (default: the latest)",
		Long: `Restore the checkpoint saved just before run ID (default: the vault's latest
run that kept one). Runs after it on the same vault are undone too and
listed. The vault must not be mounted read-write (VaultLocked otherwise):
unmount a mount left by --keep-mount first.`,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			rt, vault, id, err := a.runOf(args)
			if err != nil {
				return nil, err
			}
			r, err := rt.Undo(a.ctx, vault, id)
			if err != nil {
				return nil, err
			}
			return undoResult{r}, nil
		}),
	}
}

// runOf is the run undo and redo name (args: [ID]), its vault (the run's,
// or the selected vault without ID), and the runtime that changes it.
func (a *app) runOf(args []string) (rt *proxy.Runtime, vault, id string, err error) {
	h, store, err := a.proxyStore()
	if err != nil {
		return nil, "", "", err
	}
	if len(args) == 1 {
		id = args[0]
		e, err := store.Get(id)
		if err != nil {
			return nil, "", "", err
		}
		vault = e.Request.Vault
	} else if vault, err = a.vaultName(h); err != nil {
		return nil, "", "", err
	}
	return &proxy.Runtime{Home: h, Store: store}, vault, id, nil
}

type redoResult struct{ *proxy.RedoResult }

func (r redoResult) human(w io.Writer) {
	fmt.Fprintf(w, "redid run %s on %s: its state after the run is the working state again (%s)\n", r.Run, r.Vault, r.UndoneBy)
}

func (a *app) proxyRedoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "redo [ID]",
		Short: "Re-apply a proxy run that undo took back (default: the most recently undone)",
		Long: `Make the state run ID left (run:ID^after) the working state again, after
` + "`avfs proxy undo`" + ` took it back. Without ID, the earliest run of the vault's
latest stretch of undone runs: the one the last undo went back before.
Redo runs one at a time, oldest first, so runs undone together are redone
by repeating redo. The vault must still be in the state just before the
run (as the undo left it); when it changed since, or the run was not
undone, the error is Conflict and nothing changes. The run can be undone
again after.`,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			rt, vault, id, err := a.runOf(args)
			if err != nil {
				return nil, err
			}
			r, err := rt.Redo(a.ctx, vault, id)
			if err != nil {
				return nil, err
			}
			return redoResult{r}, nil
		}),
	}
}
