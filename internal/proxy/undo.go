package proxy

import (
	"context"
	"fmt"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
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
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	unlock, err := rt.lockVault(vault)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := mountd.EndIdle(ctx, rt.Home, vault); err != nil {
		return nil, err
	}
	var out *UndoResult
	err = rt.Store.locked(func() error {
		runs, err := rt.Store.List(vault)
		if err != nil {
			return err
		}
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
			return err
		}
		out = &UndoResult{SchemaVersion: SchemaVersion, Kind: "proxy_undo_result", Vault: vault, Run: target.ID, Checkpoint: cp, Undone: []string{}}
		by := "undo of " + target.ID
		for _, e := range runs[at:] {
			if e.Result.UndoneBy != nil || e.Result.ExitCode == nil {
				continue
			}
			e.Result.UndoneBy = &by
			if err := rt.Store.Put(e); err != nil {
				return err
			}
			out.Undone = append(out.Undone, e.ID)
		}
		return nil
	})
	return out, err
}
