package vfs

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// Retention: every proxy run saves a checkpoint, so a vault an agent
// works in gathers hundreds, each holding the chunks its state alone
// reads. Pruning deletes checkpoints by age and count, then compacts, so
// the layers only they named merge away and a collection can free their
// chunks. Two kinds are never pruned: a checkpoint of the state a fork
// started from, and the checkpoint the vault's origin records (`avfs
// apply` reads the host tree's base from it).

// Why PruneCheckpoints kept a checkpoint.
const (
	KeptFork   = "fork"      // it holds the state a fork started from
	KeptOrigin = "origin"    // the vault's origin records it
	KeptNotRun = "not_a_run" // the options' Candidate refused it (--runs-only)
	KeptNewest = "newest"    // among the newest Keep candidates
	KeptRecent = "recent"    // younger than OlderThan
)

// PruneOptions say which checkpoints PruneCheckpoints deletes: the
// candidates (Candidate; nil: every checkpoint) past the newest Keep of
// them and older than OlderThan. A rule left out (Keep negative,
// OlderThan zero) keeps nothing; at least one must be given.
type PruneOptions struct {
	Keep      int
	OlderThan time.Duration
	Candidate func(Checkpoint) bool
	DryRun    bool
	// Collect runs a garbage collection after the compaction (GC), so
	// that the chunks only the deleted checkpoints held are freed now;
	// without it the vault's automatic collection frees them once enough
	// room went into use (AutoGC).
	Collect bool
}

// KeptCheckpoint is a checkpoint pruning left, and why.
type KeptCheckpoint struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// PruneResult is what PruneCheckpoints deleted (or, dry, would delete),
// oldest first, and what it kept.
type PruneResult struct {
	Deleted []string         `json:"deleted"`
	Kept    []KeptCheckpoint `json:"kept"`
	Compact CompactStats     `json:"-"`
	GC      GCStats          `json:"-"`
}

// PruneCheckpoints deletes the checkpoints o selects in one transaction
// (none with DryRun), then compacts the vault and, with o.Collect,
// collects its garbage. A checkpoint a fork stands on or the origin
// records is never deleted. Options that select by no rule, or a
// negative Keep other than "no rule", are InvalidInput and change nothing.
func (v *Vault) PruneCheckpoints(o PruneOptions) (*PruneResult, error) {
	if o.Keep < 0 && o.OlderThan == 0 {
		return nil, errs.New(errs.InvalidInput, "checkpoint prune", "say what to prune: --keep N, --older-than D, or both")
	}
	if o.OlderThan < 0 {
		return nil, errs.New(errs.InvalidInput, "checkpoint prune", "--older-than cannot be negative")
	}
	res := &PruneResult{Deleted: []string{}, Kept: []KeptCheckpoint{}}
	write := v.eng.Update
	if o.DryRun {
		write = v.eng.View
	}
	now := v.now()
	err := write(func(kt kv.Tx) error {
		cps, err := listCheckpoints(kt)
		if err != nil {
			return err
		}
		slices.SortFunc(cps, func(a, b Checkpoint) int { // newest first, as Keep counts
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return int(b.Layer) - int(a.Layer)
		})
		forked, err := forkedStates(kt)
		if err != nil {
			return err
		}
		origin, err := originCheckpoint(kt)
		if err != nil {
			return err
		}
		var del []string
		n := 0
		for _, cp := range cps {
			reason := ""
			state, err := settledLayer(kt, cp.Layer)
			if err != nil {
				return err
			}
			switch {
			case forked[state]:
				reason = KeptFork
			case cp.Name == origin:
				reason = KeptOrigin
			case o.Candidate != nil && !o.Candidate(cp):
				reason = KeptNotRun
			default:
				n++
				switch {
				case o.Keep >= 0 && n <= o.Keep:
					reason = KeptNewest
				case o.OlderThan > 0 && now.Sub(cp.CreatedAt) < o.OlderThan:
					reason = KeptRecent
				}
			}
			if reason != "" {
				res.Kept = append(res.Kept, KeptCheckpoint{Name: cp.Name, Reason: reason})
				continue
			}
			del = append(del, cp.Name)
			if !o.DryRun {
				if err := kt.Delete(checkpointKey(cp.Name)); err != nil {
					return err
				}
			}
		}
		slices.Reverse(del)
		slices.Reverse(res.Kept)
		res.Deleted = append(res.Deleted, del...)
		return nil
	})
	if err != nil || o.DryRun || len(res.Deleted) == 0 {
		return res, storageErr("checkpoint prune", v.Name(), err)
	}
	if res.Compact, err = v.Compact(); err != nil {
		return res, err
	}
	if o.Collect {
		res.GC, err = v.GC()
	}
	return res, err
}

// forkedStates are the states forks started from, as settled layers
// (settledLayer): a checkpoint of one of them holds exactly what a fork
// stands on. (A fork pins its own frozen layer, which compaction keeps
// whatever is pruned; the checkpoint is kept for the people and tools
// that name that state.)
func forkedStates(kt kv.Tx) (map[uint64]bool, error) {
	pins, err := listPins(kt)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, p := range pins {
		l, err := settledLayer(kt, p.Layer)
		if err != nil {
			return nil, err
		}
		out[l] = true
	}
	return out, nil
}

// originCheckpoint is the checkpoint the vault's origin records, or "".
func originCheckpoint(kt kv.Tx) (string, error) {
	b, err := kt.Get(metaKey(metaOrigin))
	if errors.Is(err, kv.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var o Origin
	if err := json.Unmarshal(b, &o); err != nil {
		return "", corruptf("origin record: %v", err)
	}
	return o.Checkpoint, nil
}
