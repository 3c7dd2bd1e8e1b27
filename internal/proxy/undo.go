package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// UndoResult is what `avfs proxy undo` did.
type UndoResult struct {
	SchemaVersion int      `json:"schema_version"`
	Kind          string   `json:"kind"`
	Vault         string   `json:"vault"`
	Run           string   `json:"run"`
	Checkpoint    string   `json:"checkpoint"`
	Undone        []string `json:"undone"` // the run and every later run of the vault it undid
}

// undoable reports whether a run left a checkpoint that undo restores.
func undoable(e *Envelope) bool {
	return e.Result.Checkpoint != nil && e.Result.Checkpoint.Kept && e.Result.UndoneBy == nil &&
		(e.Result.State == StateCompleted || e.Result.State == StateTimedOut || e.Result.ExitCode != nil &&
			(e.Result.State == StateFailed || e.Result.State == StateInterrupted))
}

// Undo returns vault to the state just before run id (the latest
// undoable run when id is empty): a restore of its checkpoint, O(1).
// Later runs on the vault are undone with it and listed. A mount a run
// left to linger ends first; the vault must not be mounted read-write
// otherwise (VaultLocked). A ctx that has ended changes nothing
// (Interrupted); one that ends while a lingering mount is waited for
// stops the wait.
func (rt *Runtime) Undo(ctx context.Context, vault, id string) (*UndoResult, error) {
	var out *UndoResult
	err := rt.withRuns(ctx, vault, func(st *Store, runs []*Envelope) error {
		at := -1
		for i, e := range runs {
			if id == "" && undoable(e) || e.ID == id {
				at = i
			}
		}
		if at < 0 && id == "" {
			return &errs.Error{Kind: errs.NotFound, Op: "proxy undo", Vault: vault, Err: fmt.Errorf("no run of vault %q to undo", vault)}
		}
		if at < 0 {
			return &errs.Error{Kind: errs.NotFound, Op: "proxy undo", Err: fmt.Errorf("no run %q of vault %q", id, vault),
				Hint: "`avfs proxy history` lists the runs"}
		}
		target := runs[at]
		if !undoable(target) {
			why := "it kept no checkpoint (it did not run, ran read-only, or used --checkpoint never)"
			if target.Result.UndoneBy != nil {
				why = "it was already undone by " + *target.Result.UndoneBy
			}
			return &errs.Error{Kind: errs.InvalidInput, Op: "proxy undo", Err: fmt.Errorf("run %s cannot be undone: %s", target.ID, why)}
		}
		v, err := rt.Home.Open(vault)
		if err != nil {
			return err
		}
		defer v.Close()
		cp := target.Result.Checkpoint.Name
		if err := v.RestoreCheckpoint(cp); err != nil {
			return prunedErr("proxy undo", target.ID, cp, err)
		}
		out = &UndoResult{SchemaVersion: SchemaVersion, Kind: "proxy_undo_result", Vault: vault, Run: target.ID, Checkpoint: cp, Undone: []string{}}
		by := "undo of " + target.ID
		for _, e := range runs[at:] {
			if e.Result.UndoneBy != nil || e.Result.ExitCode == nil {
				continue
			}
			e.Result.UndoneBy = &by
			if err := st.Put(e); err != nil {
				return err
			}
			out.Undone = append(out.Undone, e.ID)
		}
		return nil
	})
	return out, err
}

// withRuns runs fn on vault's runs (oldest first) with the vault locked
// against other runs and undos, a mount a run left to linger ended, and
// the run records locked (st is where fn writes them back).
func (rt *Runtime) withRuns(ctx context.Context, vault string, fn func(st *Store, runs []*Envelope) error) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	unlock, err := rt.lockVault(vault)
	if err != nil {
		return err
	}
	defer unlock()
	if err := mountd.EndIdle(ctx, rt.Home, vault); err != nil {
		return err
	}
	return rt.Store.locked(func(st *Store) error {
		runs, err := st.List(vault)
		if err != nil {
			return err
		}
		return fn(st, runs)
	})
}

// RedoResult is what `avfs proxy redo` did.
type RedoResult struct {
	SchemaVersion int    `json:"schema_version"`
	Kind          string `json:"kind"`
	Vault         string `json:"vault"`
	Run           string `json:"run"`
	Checkpoint    string `json:"checkpoint"` // the run's checkpoint, whose after state is the working state now
	UndoneBy      string `json:"undone_by"`  // the undo it took back
}

// Redo re-applies run id, which `proxy undo` took back: the state the run
// left (run:ID^after, kept apart since its seal) becomes the working state
// again, an O(1) switch. id empty is the earliest run of the vault's last
// stretch of undone runs: the one whose undo restored the working state.
// The working state must still be the state just before the run (what
// the undo left, or what redoing the run before it left); when it moved
// on since, or the run was not undone, the error is Conflict and nothing
// changes. The run is undoable again after. Locks, lingering mounts and
// ctx as Undo.
func (rt *Runtime) Redo(ctx context.Context, vault, id string) (*RedoResult, error) {
	var out *RedoResult
	err := rt.withRuns(ctx, vault, func(st *Store, runs []*Envelope) error {
		target, err := redoTarget(runs, vault, id)
		if err != nil {
			return err
		}
		v, err := rt.Home.Open(vault)
		if err != nil {
			return err
		}
		defer v.Close()
		cp := target.Result.Checkpoint.Name
		if err := v.RestoreAfter(cp); err != nil {
			var e *errs.Error
			if errors.As(err, &e) && e.Kind == errs.Conflict {
				return &errs.Error{Kind: errs.Conflict, Op: "proxy redo", Vault: vault,
					Err:  fmt.Errorf("run %s cannot be redone: the vault changed since it was undone (its working state is not the state just before the run)", target.ID),
					Hint: "`avfs checkpoint restore " + cp + "` discards what changed since; then redo"}
			}
			return prunedErr("proxy redo", target.ID, cp, err)
		}
		by := *target.Result.UndoneBy
		target.Result.UndoneBy = nil
		if err := st.Put(target); err != nil {
			return err
		}
		out = &RedoResult{SchemaVersion: SchemaVersion, Kind: "proxy_redo_result", Vault: vault, Run: target.ID, Checkpoint: cp, UndoneBy: by}
		return nil
	})
	return out, err
}

// redoTarget picks the run Redo re-applies from the vault's runs (oldest
// first). Runs that kept no checkpoint or never ran changed nothing and
// are passed over when looking for the default.
func redoTarget(runs []*Envelope, vault, id string) (*Envelope, error) {
	stateful := func(e *Envelope) bool {
		return e.Result.Checkpoint != nil && e.Result.Checkpoint.Kept && e.Result.ExitCode != nil
	}
	if id == "" {
		var pick *Envelope
		for _, e := range slices.Backward(runs) {
			if !stateful(e) {
				continue
			}
			if e.Result.UndoneBy == nil {
				break
			}
			pick = e
		}
		if pick == nil {
			return nil, &errs.Error{Kind: errs.NotFound, Op: "proxy redo", Vault: vault, Err: fmt.Errorf("no undone run of vault %q to redo", vault),
				Hint: "`avfs proxy history` lists the runs; only runs that `avfs proxy undo` took back can be redone"}
		}
		return pick, nil
	}
	for _, e := range runs {
		if e.ID != id {
			continue
		}
		switch {
		case !stateful(e):
			return nil, &errs.Error{Kind: errs.InvalidInput, Op: "proxy redo",
				Err: fmt.Errorf("run %s cannot be redone: it kept no checkpoint or never ran (denied, read-only, --checkpoint never, or failed before the command)", id)}
		case e.Result.UndoneBy == nil:
			return nil, &errs.Error{Kind: errs.Conflict, Op: "proxy redo", Vault: vault,
				Err: fmt.Errorf("run %s cannot be redone: it was not undone", id), Hint: "`avfs proxy history` shows which runs were undone"}
		}
		return e, nil
	}
	return nil, &errs.Error{Kind: errs.NotFound, Op: "proxy redo", Err: fmt.Errorf("no run %q of vault %q", id, vault),
		Hint: "`avfs proxy history` lists the runs"}
}

// prunedErr says, when err is the checkpoint of run id missing, that
// retention pruned it (or someone deleted it): the run cannot be undone
// or redone any more. Other errors pass as they are.
func prunedErr(op, id, cp string, err error) error {
	if !errs.Is(err, errs.CheckpointNotFound) {
		return err
	}
	return &errs.Error{Kind: errs.CheckpointNotFound, Op: op, Path: cp,
		Err:  fmt.Errorf("run %s's checkpoint %s is gone: it was pruned (a vault keeps its newest %d run checkpoints unless `avfs vault set` says otherwise) or deleted", id, cp, vfs.DefaultRunCheckpoints),
		Hint: "`avfs vault set NAME run-checkpoints=N` keeps more; 0 keeps all"}
}
