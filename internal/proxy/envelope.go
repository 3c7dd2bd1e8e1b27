package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// SchemaVersion is the version of the envelope (docs/schema/proxy-exec.json).
// Fields may be added; renaming one is a new version.
const SchemaVersion = 1

// Kind is the envelope's discriminator.
const Kind = "proxy_exec_result"

// The states of a run. A run moves through the stages in order and ends in
// one of the terminal states: completed (the command ran and exited by
// itself), timed_out (its --timeout stopped it), interrupted (SIGINT or
// SIGTERM to avfs, or the end of the caller's context, stopped the command
// or a stage before it), denied, awaiting_approval, failed.
const (
	StateRequest          = "request"
	StateClassify         = "classify"
	StateCheckpoint       = "checkpoint"
	StateMount            = "mount"
	StateExecute          = "execute"
	StateSummarize        = "summarize"
	StateReport           = "report"
	StateCompleted        = "completed"
	StateTimedOut         = "timed_out"
	StateInterrupted      = "interrupted"
	StateDenied           = "denied"
	StateAwaitingApproval = "awaiting_approval"
	StateFailed           = "failed"
)

// Stages lists the timed stages, in order.
var Stages = []string{StateRequest, StateClassify, StateCheckpoint, StateMount, StateExecute, StateSummarize, StateReport}

// Envelope is the one JSON document a run produces, and what is kept of it
// under $AVFS_HOME/proxy/runs/<id>.json.
type Envelope struct {
	SchemaVersion int         `json:"schema_version"`
	Kind          string      `json:"kind"`
	ID            string      `json:"id"`
	CreatedAt     time.Time   `json:"created_at"`
	Success       bool        `json:"success"`
	Request       RequestInfo `json:"request"`
	Result        Result      `json:"result"`
}

// RequestInfo is what was asked.
type RequestInfo struct {
	Vault          string   `json:"vault"`
	Cwd            string   `json:"cwd"`
	Readonly       bool     `json:"readonly"`
	KeepMount      bool     `json:"keep_mount"`
	LingerMs       float64  `json:"linger_ms"`  // how long a mount it starts stays, idle; 0: unmounted after
	Mountpoint     *string  `json:"mountpoint"` // the mount the run will use, once known
	CheckpointMode string   `json:"checkpoint_mode"`
	Command        []string `json:"command"`
	CommandMode    string   `json:"command_mode"` // "argv" or "shell"
	Timeout        string   `json:"timeout"`      // a Go duration; "0s" is none
	TimeoutMs      float64  `json:"timeout_ms"`
	GraceMs        float64  `json:"grace_ms"`
	MaxOutput      int64    `json:"max_output"`
	Stdin          bool     `json:"stdin"`
	EnvKeys        []string `json:"env_keys"` // the names given with --env; values are not kept
	Approval       *string  `json:"approval"` // the approval this run uses
	Isolate        string   `json:"isolate"`  // --isolate: auto, on or off
	Changes        string   `json:"changes"`  // --changes: full, summary or none
}

// Result is what happened.
type Result struct {
	Vault       string  `json:"vault"`
	Mountpoint  *string `json:"mountpoint"`
	MountReused bool    `json:"mount_reused"`
	// MountLingers says the run's mount stays after it for the next run
	// (a mount it reused or left to linger); false: it ended with the run
	// (--linger 0, an overlay this process served, or one whose upper
	// grew past the lingering bound).
	MountLingers bool `json:"mount_lingers"`
	// Transport names the transport that served the mount ("fuse"); null
	// when the run mounted nothing.
	Transport *string `json:"transport"`
	// TransportReason says why the run's transport was chosen (null when
	// the run mounted nothing or reused a live mount).
	TransportReason *string `json:"transport_reason"`
	// Overlay is what an overlay run cost (null on other transports).
	Overlay         *OverlayInfo       `json:"overlay"`
	Cwd             string             `json:"cwd"`
	Command         []string           `json:"command"`
	ExitCode        *int               `json:"exit_code"`
	Signal          *string            `json:"signal"`
	Stdout          string             `json:"stdout"`
	Stderr          string             `json:"stderr"`
	StdoutTruncated bool               `json:"stdout_truncated"`
	StderrTruncated bool               `json:"stderr_truncated"`
	StdoutBytes     int64              `json:"stdout_bytes"`
	StderrBytes     int64              `json:"stderr_bytes"`
	DurationMs      float64            `json:"duration_ms"`
	StageMs         map[string]float64 `json:"stage_ms"`
	Checkpoint      *CheckpointInfo    `json:"checkpoint"`
	ChangedFiles    int                `json:"changed_files"`
	Changes         []Change           `json:"changes"`
	RenamesDetected bool               `json:"renames_detected"`
	Decision        policy.Decision    `json:"decision"`
	// ChangesTruncated says Changes was cut at ChangesLimit entries
	// (--changes full); ChangedFiles still counts every change.
	ChangesTruncated bool `json:"changes_truncated"`
	// Summary sums every change (null with --changes none: no diff).
	Summary *Summary `json:"summary"`
	// Isolation is the boundary the command ran in (null when it did
	// not run: denied, awaiting approval, or failed before).
	Isolation *sandbox.Isolation `json:"isolation"`
	State     string             `json:"state"`
	TimedOut  bool               `json:"timed_out"`
	Approval  *Approval          `json:"approval"`
	Error     *ErrorInfo         `json:"error"`
	UndoneBy  *string            `json:"undone_by"`
}

// CheckpointInfo is the run's pre-run checkpoint. Kept is false when the
// checkpoint was only used for the change summary and then deleted
// (--checkpoint never).
type CheckpointInfo struct {
	Name      string `json:"name"`
	Requested bool   `json:"requested"` // the policy or --checkpoint always asked for it
	Kept      bool   `json:"kept"`
}

// Change is one changed path of a run.
type Change struct {
	Path       string  `json:"path"`
	Kind       string  `json:"kind"` // added, modified, deleted, renamed, type_changed, mode_changed
	Type       string  `json:"type"`
	From       *string `json:"from"` // the old path of a rename
	SizeBefore int64   `json:"size_before"`
	SizeAfter  int64   `json:"size_after"`
}

// Approval is the approval a run waits for or used.
type Approval struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"` // pending, approved, rejected, used
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at"`
	UsedBy    *string    `json:"used_by"`
	// MAC binds an approved request to this record (approval.go): null
	// until a person approves, and again once the approval is used.
	MAC *string `json:"mac"`
}

// ErrorInfo is why a run failed.
type ErrorInfo struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// newID returns a run id: the UTC time to the nanosecond and random bits,
// so ids sort by time and never collide within a millisecond. It is also
// a valid checkpoint name.
func newID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405.000000000") + "-" + hex.EncodeToString(b[:])
}

// CheckpointName is the name of a run's pre-run checkpoint.
func CheckpointName(id string) string { return "proxy-" + id }

// Store keeps the runs of one avfs home, or of every home naming one
// store (OpenStore).
type Store struct {
	Dir string // the runs' directory of a home without a store; "" otherwise
	r   records
}

// NewStore opens the run store under home, in files.
func NewStore(home string) (*Store, error) {
	dir := filepath.Join(home, "proxy", "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy", Path: dir, Err: err}
	}
	return &Store{Dir: dir, r: &fileRecords{home: home, dir: dir}}, nil
}

// checkID refuses ids that are not run ids (they name files).
func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\\") || strings.HasPrefix(id, ".") || len(id) > 128 {
		return errs.New(errs.InvalidInput, "proxy", "invalid run id %q", id)
	}
	return nil
}

// Put writes a run atomically and durably (atomicfile, or one
// transaction of the store): a record that was written survives a crash,
// whole.
func (s *Store) Put(e *Envelope) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy", Err: err}
	}
	if err := s.r.write(e.ID, append(b, '\n')); err != nil {
		return storeErr(err)
	}
	return nil
}

// Get reads one run; a missing one is NotFound.
func (s *Store) Get(id string) (*Envelope, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	b, err := s.r.read(id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &errs.Error{Kind: errs.NotFound, Op: "proxy", Err: fmt.Errorf("no proxy run %q", id),
			Hint: "`avfs proxy history` lists the runs"}
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return s.decode(id, b)
}

// decode reads run id's record b.
func (s *Store) decode(id string, b []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, &errs.Error{Kind: errs.CorruptVault, Op: "proxy", Path: s.r.where(id), Err: err}
	}
	if e.SchemaVersion != SchemaVersion {
		return nil, &errs.Error{Kind: errs.UnsupportedFormat, Op: "proxy", Path: s.r.where(id),
			Err: fmt.Errorf("run record of schema version %d; this avfs reads %d", e.SchemaVersion, SchemaVersion)}
	}
	if e.Request.Changes == "" { // recorded before --changes: the whole list, which the summary sums
		e.Request.Changes, e.Result.Summary = ChangesFull, summarizeChanges(e.Result.Changes)
	}
	return &e, nil
}

// locked runs fn holding the store's lock (approvals and undo marks are
// read-modify-write); fn reads and writes through the Store it is given.
// The lock holds across hosts when the runs are in a store.
func (s *Store) locked(fn func(*Store) error) error {
	return s.r.locked(func(r records) error { return fn(&Store{Dir: s.Dir, r: r}) })
}

// List returns the runs, oldest first; vault filters when not empty.
func (s *Store) List(vault string) ([]*Envelope, error) {
	out := []*Envelope{}
	err := s.r.each(func(id string, b []byte) {
		if checkID(id) != nil {
			return
		}
		e, err := s.decode(id, b)
		if err != nil {
			return // a torn or foreign record is skipped, not fatal to the listing
		}
		if vault == "" || e.Request.Vault == vault {
			out = append(out, e)
		}
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}
