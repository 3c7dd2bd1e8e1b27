package avfs

import (
	"time"

	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// Envelope is what a run produced: what `avfs proxy exec --json` prints
// (docs/schema/proxy-exec.json), with durations as time.Duration, times
// as time.Time and states, actions and kinds typed.
type Envelope struct {
	ID        string    // the run's id; "run:ID" is the REF of the state before it
	CreatedAt time.Time // UTC
	Success   bool      // the command completed with exit code 0
	Request   RunRequest
	Result    RunResult
}

// RunRequest is what a run was asked to do.
type RunRequest struct {
	Vault     string
	Cwd       string // the working directory inside the vault
	ReadOnly  bool
	KeepMount bool
	// Linger is how long a mount the run starts stays, idle; 0: it is
	// unmounted after the run.
	Linger     time.Duration
	Mountpoint string // the mount the run uses, once known; "" before
	Checkpoint CheckpointMode
	// Command is the argv; a Shell request is /bin/sh -c SCRIPT.
	Command   []string
	Shell     bool
	Timeout   time.Duration // 0: no limit
	Grace     time.Duration // between SIGTERM and SIGKILL
	MaxOutput int64         // bytes of stdout and of stderr kept
	Stdin     bool          // the command was given a stdin
	EnvKeys   []string      // the names of ExecRequest.Env; values are not kept
	Approval  string        // the approval id the run uses; "" for none
	Isolate   IsolateMode
	Changes   ChangesMode
}

// RunResult is what happened in a run.
type RunResult struct {
	Vault       string
	Mountpoint  string // "" when the run mounted nothing
	MountReused bool   // the run used a mount that was already there
	// MountLingers: the run's mount stays after it, warm for the next
	// run, until idle for the run's linger (or it gives way to a write).
	MountLingers bool
	// Transport names what served the workspace ("fuse", "overlay"); ""
	// when the run mounted nothing. TransportReason says why it was chosen.
	Transport       string
	TransportReason string
	// Overlay is what an overlay run cost; nil on other transports.
	Overlay *OverlayCost
	Cwd     string
	Command []string
	// ExitCode is the command's exit code; nil when it did not exit by
	// itself (not run, or killed by Signal).
	ExitCode *int
	Signal   string // the signal that ended the command ("SIGTERM"); "" for none
	// Stdout and Stderr are the output kept (RunRequest.MaxOutput bytes
	// of each); the Bytes fields count all of it.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	StdoutBytes, StderrBytes         int64
	Duration                         time.Duration
	Stages                           map[Stage]time.Duration // how long each stage took
	// Checkpoint is the pre-run checkpoint; nil when none was saved.
	Checkpoint   *RunCheckpoint
	ChangedFiles int
	Changes      []Change
	// ChangesTruncated says Changes was cut at ChangesLimit entries.
	ChangesTruncated bool
	// Summary counts every change; nil with ChangesNone.
	Summary         *ChangeSummary
	RenamesDetected bool // Changes pairs renames (Renamed, From)
	Decision        Decision
	// Isolation is the boundary the command ran in; nil when it did not
	// run (denied, awaiting approval, or failed before).
	Isolation *Isolation
	State     RunState
	TimedOut  bool
	// Approval is the approval the run waits for or used; nil for none.
	Approval *Approval
	Error    *RunError // why the run failed; nil when it did not
	UndoneBy string    // the run whose undo undid this one; "" for none
}

// RunCheckpoint is a run's pre-run checkpoint. Kept is false when it only
// served the change summary and was deleted (CheckpointNever).
type RunCheckpoint struct {
	Name      string
	Requested bool // the policy or CheckpointAlways asked for it
	Kept      bool
}

// RunError is why a run failed.
type RunError struct {
	Kind    Kind
	Message string
}

// Decision is what the policy decided for a request.
type Decision struct {
	Action     Action
	Categories []string // what the policy saw: "read", "write", "network", ...
	Reason     string
	Rule       string // the rule that decided; "" for the defaults
	Commands   []CommandDecision
	// Dynamic is true when a word of the request is known only at run
	// time ($x, $(...)): such a request never runs without a checkpoint.
	Dynamic bool
}

// CommandDecision is the decision for one simple command of a request.
type CommandDecision struct {
	Program    string
	Args       []string
	Action     Action
	Categories []string
	Reason     string
	Rule       string
	Dynamic    bool
}

// Isolation is the kernel boundary a command ran in.
type Isolation struct {
	Requested IsolateMode
	Mode      string   // "namespaces" or "none"
	Network   string   // "none" or "host"; "host" whenever Mode is "none"
	Hidden    []string // host paths the run could not see
	Writable  []string // host paths it could write besides the workspace and its /tmp
	ReadOnly  []string // paths made read-only inside otherwise writable trees
	Reason    string   // why this mode and network
}

// Approval is the approval a run waits for or used.
type Approval struct {
	ID        string
	Status    ApprovalStatus
	ExpiresAt time.Time
	DecidedAt time.Time // zero until a person decides
	UsedBy    string    // the run that used it; "" until used
}

// ApprovalStatus is where an approval stands.
type ApprovalStatus string

func (s ApprovalStatus) String() string { return string(s) }

// The statuses of an approval.
const (
	StatusPending  ApprovalStatus = "pending"
	StatusApproved ApprovalStatus = "approved"
	StatusRejected ApprovalStatus = "rejected"
	StatusUsed     ApprovalStatus = "used"
)

// RunState is the final state of a run.
type RunState string

func (s RunState) String() string { return string(s) }

// The final states of a run (RunResult.State).
const (
	StateCompleted RunState = "completed"
	// StateTimedOut is a command its Timeout stopped.
	StateTimedOut RunState = "timed_out"
	// StateInterrupted is a run that the end of Exec's ctx stopped: the
	// command (SIGTERM to its group, SIGKILL after Grace), or a stage
	// before it.
	StateInterrupted      RunState = "interrupted"
	StateDenied           RunState = "denied"
	StateAwaitingApproval RunState = "awaiting_approval"
	StateFailed           RunState = "failed"
)

// Stage is a timed stage of a run, in the order they run.
type Stage string

func (s Stage) String() string { return string(s) }

// The stages of a run.
const (
	StageRequest    Stage = "request"
	StageClassify   Stage = "classify"
	StageCheckpoint Stage = "checkpoint"
	StageMount      Stage = "mount"
	StageExecute    Stage = "execute"
	StageSummarize  Stage = "summarize"
	StageReport     Stage = "report"
)

// Action is what the policy decided for a command.
type Action string

func (a Action) String() string { return string(a) }

// The policy's actions, from the most to the least permissive.
const (
	Allow               Action = "allow"
	AllowWithCheckpoint Action = "allow_with_checkpoint"
	RequireApproval     Action = "require_approval"
	Deny                Action = "deny"
)

// CheckpointMode says whether a run keeps its pre-run checkpoint.
type CheckpointMode string

func (m CheckpointMode) String() string { return string(m) }

// The checkpoint modes; "" is CheckpointAuto.
const (
	CheckpointAuto   CheckpointMode = "auto"   // kept (undo restores it)
	CheckpointAlways CheckpointMode = "always" // kept, and asked for whatever the policy says
	CheckpointNever  CheckpointMode = "never"  // deleted after the change summary
)

// TransportMode is the workspace asked for a run.
type TransportMode string

func (m TransportMode) String() string { return string(m) }

// The transports; "" is TransportAuto.
const (
	TransportAuto    TransportMode = "auto"
	TransportFUSE    TransportMode = "fuse"
	TransportOverlay TransportMode = "overlay"
)

// OverlayCost is what an overlay run cost: finding or materializing its
// lower layers, and ingesting its upper dir into the vault.
type OverlayCost struct {
	Lowers            int  // lower dirs stacked
	Materialized      bool // a layer was written for this run
	Materialize       time.Duration
	MaterializedFiles int
	MaterializedBytes int64
	Ingest            time.Duration
	IngestedFiles     int // files read back from the upper dir
	IngestedBytes     int64
	Deleted           int // names whiteouts and opaque dirs removed
	// Reused: the upper dir became the cached form of the run's layer, so
	// the next run on it materializes nothing.
	Reused bool
	// UpperBound is the size of the tmpfs the upper dir was on (a vault
	// with a size quota), 0 when it was not bounded.
	UpperBound int64
}

// ChangesMode is how much of a run's change list the envelope holds.
type ChangesMode string

func (m ChangesMode) String() string { return string(m) }

// The change list modes; "" is ChangesFull.
const (
	// ChangesFull lists the changes, at most ChangesLimit of them
	// (RunResult.ChangesTruncated says when the list was cut).
	ChangesFull ChangesMode = "full"
	// ChangesSummary gives RunResult.Summary and no list.
	ChangesSummary ChangesMode = "summary"
	// ChangesNone skips the diff: no list, no summary, ChangedFiles 0.
	ChangesNone ChangesMode = "none"
)

// ChangesLimit is the most changes an envelope lists.
const ChangesLimit = 10000

// ChangeSummary counts a run's changes, all of them (the list may be cut).
type ChangeSummary struct {
	Added, Modified, Deleted, Renamed int
	BytesAdded, BytesRemoved          int64 // from sizes: what was added and what was removed
}

// IsolateMode is the kernel boundary asked for a run.
type IsolateMode string

func (m IsolateMode) String() string { return string(m) }

// The isolation modes; "" is IsolateAuto.
const (
	// IsolateAuto: user, mount, PID, IPC, UTS and network namespaces where
	// the host can make them, else none (RunResult.Isolation says which).
	IsolateAuto IsolateMode = "auto"
	IsolateOn   IsolateMode = "on" // or fail with IsolationUnavailable
	IsolateOff  IsolateMode = "off"
)

// UndoResult is what Undo did.
type UndoResult struct {
	Vault      string
	Run        string   // the run undone
	Checkpoint string   // the checkpoint restored
	Undone     []string // the run and every later run of the vault it undid
}

// RedoResult is what Redo did.
type RedoResult struct {
	Vault      string
	Run        string // the run redone
	Checkpoint string // the run's checkpoint, whose after state is the working state now
	UndoneBy   string // the undo it took back
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// envelope converts a run's record; nil stays nil.
func envelope(e *proxy.Envelope) *Envelope {
	if e == nil {
		return nil
	}
	q, r := e.Request, e.Result
	out := &Envelope{ID: e.ID, CreatedAt: e.CreatedAt, Success: e.Success,
		Request: RunRequest{Vault: q.Vault, Cwd: q.Cwd, ReadOnly: q.Readonly, KeepMount: q.KeepMount,
			Linger: ms(q.LingerMs), Mountpoint: str(q.Mountpoint), Checkpoint: CheckpointMode(q.CheckpointMode),
			Command: q.Command, Shell: q.CommandMode == "shell", Timeout: ms(q.TimeoutMs), Grace: ms(q.GraceMs),
			MaxOutput: q.MaxOutput, Stdin: q.Stdin, EnvKeys: q.EnvKeys, Approval: str(q.Approval), Isolate: IsolateMode(q.Isolate),
			Changes: ChangesMode(q.Changes)},
		Result: RunResult{Vault: r.Vault, Mountpoint: str(r.Mountpoint), MountReused: r.MountReused, MountLingers: r.MountLingers, Transport: str(r.Transport), TransportReason: str(r.TransportReason), Cwd: r.Cwd,
			Command: r.Command, ExitCode: r.ExitCode, Signal: str(r.Signal), Stdout: r.Stdout, Stderr: r.Stderr,
			StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, StdoutBytes: r.StdoutBytes,
			StderrBytes: r.StderrBytes, Duration: ms(r.DurationMs), ChangedFiles: r.ChangedFiles, ChangesTruncated: r.ChangesTruncated,
			RenamesDetected: r.RenamesDetected, Decision: decision(r.Decision), Isolation: isolation(r.Isolation),
			State: RunState(r.State), TimedOut: r.TimedOut, UndoneBy: str(r.UndoneBy)},
	}
	if o := r.Overlay; o != nil {
		out.Result.Overlay = &OverlayCost{Lowers: o.Lowers, Materialized: o.Materialized, Materialize: ms(o.MaterializeMs),
			MaterializedFiles: o.MaterializedFiles, MaterializedBytes: o.MaterializedBytes, Ingest: ms(o.IngestMs),
			IngestedFiles: o.IngestedFiles, IngestedBytes: o.IngestedBytes, Deleted: o.Deleted, Reused: o.Reused,
			UpperBound: o.UpperBoundBytes}
	}
	if m := r.Summary; m != nil {
		out.Result.Summary = &ChangeSummary{Added: m.Added, Modified: m.Modified, Deleted: m.Deleted, Renamed: m.Renamed,
			BytesAdded: m.BytesAdded, BytesRemoved: m.BytesRemoved}
	}
	if r.StageMs != nil {
		out.Result.Stages = make(map[Stage]time.Duration, len(r.StageMs))
		for s, v := range r.StageMs {
			out.Result.Stages[Stage(s)] = ms(v)
		}
	}
	if c := r.Checkpoint; c != nil {
		out.Result.Checkpoint = &RunCheckpoint{Name: c.Name, Requested: c.Requested, Kept: c.Kept}
	}
	out.Result.Changes = make([]Change, len(r.Changes))
	for i, c := range r.Changes {
		out.Result.Changes[i] = Change{Path: c.Path, Kind: ChangeKind(c.Kind), Type: FileType(c.Type), From: str(c.From),
			SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter}
	}
	if a := r.Approval; a != nil {
		out.Result.Approval = &Approval{ID: a.ID, Status: ApprovalStatus(a.Status), ExpiresAt: a.ExpiresAt, UsedBy: str(a.UsedBy)}
		if a.DecidedAt != nil {
			out.Result.Approval.DecidedAt = *a.DecidedAt
		}
	}
	if r.Error != nil {
		out.Result.Error = &RunError{Kind: Kind(r.Error.Error), Message: r.Error.Message}
	}
	return out
}

func decision(d policy.Decision) Decision {
	out := Decision{Action: Action(d.Action), Categories: d.Categories, Reason: d.Reason, Rule: d.Rule, Dynamic: d.Dynamic}
	if d.Commands != nil {
		out.Commands = make([]CommandDecision, len(d.Commands))
		for i, c := range d.Commands {
			out.Commands[i] = CommandDecision{Program: c.Program, Args: c.Args, Action: Action(c.Action),
				Categories: c.Categories, Reason: c.Reason, Rule: c.Rule, Dynamic: c.Dynamic}
		}
	}
	return out
}

func isolation(i *sandbox.Isolation) *Isolation {
	if i == nil {
		return nil
	}
	return &Isolation{Requested: IsolateMode(i.Requested), Mode: i.Mode, Network: i.Network, Hidden: i.Hidden,
		Writable: i.Writable, ReadOnly: i.ReadOnly, Reason: i.Reason}
}

func redoResult(r *proxy.RedoResult) *RedoResult {
	if r == nil {
		return nil
	}
	return &RedoResult{Vault: r.Vault, Run: r.Run, Checkpoint: r.Checkpoint, UndoneBy: r.UndoneBy}
}

func undoResult(u *proxy.UndoResult) *UndoResult {
	if u == nil {
		return nil
	}
	return &UndoResult{Vault: u.Vault, Run: u.Run, Checkpoint: u.Checkpoint, Undone: u.Undone}
}
