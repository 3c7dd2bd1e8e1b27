package proxy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// request validates a request, fills in its defaults, and builds the
// envelope. With --approval it also checks the approval and returns its
// run (the request then is the approved one, exactly).
func (rt *Runtime) request(req *Request, now time.Time) (*Envelope, *Envelope, error) {
	if err := registry.CheckName(req.Vault); err != nil {
		return nil, nil, err
	}
	if !rt.Home.Exists(req.Vault) {
		return nil, nil, &errs.Error{Kind: errs.VaultNotFound, Op: "proxy exec", Vault: req.Vault, Err: fmt.Errorf("no vault named %q", req.Vault)}
	}
	var approved *Envelope
	if req.Approval != "" {
		a, err := rt.checkApproval(req)
		if err != nil {
			return nil, nil, err
		}
		approved = a
	}
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return nil, nil, errs.New(errs.InvalidInput, "proxy exec", "give a command: --shell SCRIPT or -- ARGV...")
	}
	cwd, err := cleanCwd(req.Cwd)
	if err != nil {
		return nil, nil, err
	}
	req.Cwd = cwd
	switch req.Checkpoint {
	case "":
		req.Checkpoint = CheckpointAuto
	case CheckpointAuto, CheckpointAlways, CheckpointNever:
	default:
		return nil, nil, errs.New(errs.InvalidInput, "proxy exec", "--checkpoint must be auto, always or never, not %q", req.Checkpoint)
	}
	if _, err := sandbox.ParseMode(req.Isolate); err != nil {
		return nil, nil, err
	}
	if req.Changes, err = checkChanges(req.Changes); err != nil {
		return nil, nil, err
	}
	if req.Timeout < 0 || req.Grace < 0 {
		return nil, nil, errs.New(errs.InvalidInput, "proxy exec", "--timeout and --grace cannot be negative")
	}
	if req.MaxOutput < 0 || req.Linger < 0 {
		return nil, nil, errs.New(errs.InvalidInput, "proxy exec", "--max-output and --linger cannot be negative")
	}
	if req.MaxOutput == 0 {
		req.MaxOutput = DefaultMaxOutput
	}
	var keys []string
	for _, kv := range req.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") {
			return nil, nil, errs.New(errs.InvalidInput, "proxy exec", "--env wants KEY=VALUE, not %q", kv)
		}
		keys = append(keys, k)
	}
	command, mode := req.Argv, "argv"
	if req.Shell != "" {
		command, mode = []string{"/bin/sh", "-c", req.Shell}, "shell"
	}
	id := newID(now)
	env := &Envelope{
		SchemaVersion: SchemaVersion, Kind: Kind, ID: id, CreatedAt: now.UTC(),
		Request: RequestInfo{
			Vault: req.Vault, Cwd: req.Cwd, Readonly: req.Readonly, KeepMount: req.KeepMount,
			LingerMs:       float64(req.idleTimeout().Microseconds()) / 1000,
			CheckpointMode: req.Checkpoint, Command: slices.Clone(command), CommandMode: mode,
			Timeout: req.Timeout.String(), TimeoutMs: float64(req.Timeout.Microseconds()) / 1000,
			GraceMs: float64(req.Grace.Microseconds()) / 1000, MaxOutput: req.MaxOutput,
			Stdin: req.Stdin != nil, EnvKeys: append([]string{}, keys...), Isolate: isolateOf(req.Isolate),
			Changes: req.Changes,
		},
		Result: Result{
			Vault: req.Vault, Cwd: req.Cwd, Command: slices.Clone(command), StageMs: map[string]float64{},
			Changes: []Change{}, Summary: &Summary{}, State: StateRequest,
		},
	}
	for _, s := range Stages {
		env.Result.StageMs[s] = 0
	}
	if approved != nil {
		env.Request.Approval = &approved.ID
	}
	return env, approved, nil
}

// isolateOf is the --isolate a request asks for, "" being auto.
func isolateOf(m string) string {
	if m == "" {
		return string(sandbox.Auto)
	}
	return m
}

// cleanCwd makes --cwd an absolute, clean path inside the vault; ".."
// may not climb above its root.
func cleanCwd(cwd string) (string, error) {
	depth := 0
	for _, seg := range strings.Split(cwd, "/") {
		switch seg {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return "", &errs.Error{Kind: errs.InvalidPath, Op: "proxy exec", Path: cwd, Err: errors.New("--cwd climbs above the vault's root")}
			}
		default:
			depth++
		}
	}
	return path.Clean("/" + cwd), nil
}

// isolateRank orders --isolate values from the loosest: off, auto, on.
func isolateRank(m string) int {
	switch sandbox.Mode(m) {
	case sandbox.Off:
		return 0
	case sandbox.On:
		return 2
	}
	return 1
}

// checkApproval checks that --approval names an approved, unused,
// unexpired approval of the same request, and makes the request exactly
// that one: a command given again must be the same.
func (rt *Runtime) checkApproval(req *Request) (*Envelope, error) {
	a, err := rt.Store.Get(req.Approval)
	if err != nil {
		return nil, err
	}
	if err := rt.approvalUsable(rt.Store, a); err != nil {
		return nil, err
	}
	want := a.Request
	mismatch := func(what string) error {
		return &errs.Error{Kind: ApprovalMismatch, Op: "proxy exec", Err: fmt.Errorf("approval %s is for another %s", a.ID, what),
			Hint: "pass --approval alone to run exactly the approved command"}
	}
	if req.Vault != want.Vault {
		return nil, mismatch("vault (" + want.Vault + ")")
	}
	// The person approved the run with its boundary: it may run with a
	// stricter --isolate, never a looser one.
	if req.Isolate == "" {
		req.Isolate = want.Isolate
	}
	if want.Isolate != "" && isolateRank(req.Isolate) < isolateRank(want.Isolate) {
		return nil, mismatch("isolation (--isolate " + want.Isolate + ")")
	}
	if req.Cwd != "" {
		if c, err := cleanCwd(req.Cwd); err != nil || c != want.Cwd {
			return nil, mismatch("working directory (" + want.Cwd + ")")
		}
	}
	if len(req.Argv) > 0 || req.Shell != "" {
		same := want.CommandMode == "shell" && req.Shell == strings.Join(want.Command[2:], "") ||
			want.CommandMode == "argv" && slices.Equal(req.Argv, want.Command)
		if !same {
			return nil, mismatch("command")
		}
	}
	req.Cwd = want.Cwd
	req.Argv, req.Shell = nil, ""
	if want.CommandMode == "shell" {
		req.Shell = want.Command[2]
	} else {
		req.Argv = slices.Clone(want.Command)
	}
	return a, nil
}

// approvalUsable says why a run's approval cannot be used now.
func (rt *Runtime) approvalUsable(st *Store, a *Envelope) error {
	ap := a.Result.Approval
	if ap == nil || a.Result.State != StateAwaitingApproval {
		return &errs.Error{Kind: errs.NotFound, Op: "proxy", Err: fmt.Errorf("run %s did not ask for approval", a.ID)}
	}
	switch ap.Status {
	case "pending":
		if rt.now().After(ap.ExpiresAt) {
			return &errs.Error{Kind: ApprovalExpired, Op: "proxy", Err: fmt.Errorf("approval %s expired at %s", ap.ID, ap.ExpiresAt.Format(time.RFC3339))}
		}
		return &errs.Error{Kind: ApprovalRequired, Op: "proxy", Err: fmt.Errorf("approval %s is not approved yet", ap.ID),
			Hint: "a person runs `avfs proxy approve " + ap.ID + "`"}
	case "rejected":
		return &errs.Error{Kind: ApprovalRejected, Op: "proxy", Err: fmt.Errorf("approval %s was rejected", ap.ID)}
	case "used":
		return &errs.Error{Kind: ApprovalUsed, Op: "proxy", Err: fmt.Errorf("approval %s was already used by run %s", ap.ID, deref(ap.UsedBy))}
	}
	if ap.Status != "approved" {
		return &errs.Error{Kind: ApprovalForged, Op: "proxy", Err: fmt.Errorf("approval %s has the unknown status %q", ap.ID, ap.Status)}
	}
	if err := checkMAC(st, a); err != nil {
		return err
	}
	by, err := st.r.usedBy(a.ID)
	if err != nil {
		return err
	}
	if by != "" {
		return &errs.Error{Kind: ApprovalUsed, Op: "proxy", Err: fmt.Errorf("approval %s was already used by run %s (its record was edited back)", ap.ID, by)}
	}
	if rt.now().After(ap.ExpiresAt) {
		return &errs.Error{Kind: ApprovalExpired, Op: "proxy", Err: fmt.Errorf("approval %s expired at %s", ap.ID, ap.ExpiresAt.Format(time.RFC3339))}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// useApproval marks an approval used by run id, under the store's lock so
// that two runs cannot both use it.
func (rt *Runtime) useApproval(approvalID, id string) (*Approval, error) {
	var out *Approval
	err := rt.Store.locked(func(st *Store) error {
		a, err := st.Get(approvalID)
		if err != nil {
			return err
		}
		if err := rt.approvalUsable(st, a); err != nil {
			return err
		}
		// The ledger first: once it names the approval, no edit of the
		// record makes it count again.
		if err := st.r.markUsed(a.ID, id); err != nil {
			return err
		}
		a.Result.Approval.Status, a.Result.Approval.UsedBy = "used", &id
		a.Result.Approval.MAC = nil
		if err := st.Put(a); err != nil {
			return err
		}
		c := *a.Result.Approval
		out = &c
		return nil
	})
	return out, err
}

// Decide records a person's answer to a run awaiting approval. It is
// refused from inside a proxy run (ApprovalFromRun); an approval carries
// the MAC that makes it count.
func (rt *Runtime) Decide(id string, approve bool) (*Envelope, error) {
	op := map[bool]string{true: "proxy approve", false: "proxy reject"}[approve]
	if err := rt.outsideRun(op); err != nil {
		return nil, err
	}
	var key []byte
	if approve {
		k, err := rt.Store.r.key(true)
		if err != nil {
			return nil, err
		}
		key = k
	}
	var out *Envelope
	err := rt.Store.locked(func(st *Store) error {
		a, err := st.Get(id)
		if err != nil {
			return err
		}
		if err := rt.approvalUsable(st, a); err != nil && !errs.Is(err, ApprovalRequired) {
			return err
		} else if err == nil {
			return &errs.Error{Kind: errs.AlreadyExists, Op: "proxy", Err: fmt.Errorf("approval %s was already approved", id)}
		}
		t := rt.now().UTC()
		a.Result.Approval.DecidedAt = &t
		a.Result.Approval.Status = "rejected"
		if approve {
			a.Result.Approval.Status = "approved"
			mac := approvalMAC(key, a)
			a.Result.Approval.MAC = &mac
		}
		out = a
		return st.Put(a)
	})
	return out, err
}

// lockVault takes the vault's run lock (mountrec.LockRuns) for the length
// of a run. Two runs on one vault do not queue: the second fails with
// VaultLocked, so an agent learns at once that its workspace is busy.
func (rt *Runtime) lockVault(vault string) (func(), error) {
	return mountrec.LockRuns(rt.Home, vault, fmt.Sprintf("proxy run, pid %d", os.Getpid()))
}
