//go:build linux

package overlay

import (
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// A workspace that lingers for more runs (a proxy run's, served by its
// own process) meets checkpoints and seals between its persists: each
// run's checkpoint freezes the working state, and its summary seals what
// the run wrote. Persist, which ingests the whole upper over the run's
// base each time, would put each run's writes beside its checkpoint
// instead of on it, and `proxy redo` (vfs.RestoreAfter) finds a run's
// writes as the layer that stands on its checkpoint. PersistOnto writes
// onto the working state as it stands instead.

// PersistOnto ingests the upper into v's working state where it stands.
// That state is the base with the upper as the last ingest found it:
// nothing else writes the vault while the workspace holds its writer
// lock, and a checkpoint or a seal only freezes. So the ingest writes the
// upper over it again and removes what the last ingest took from the
// upper and the upper no longer holds (a file the run created, then
// removed: overlayfs drops it from the upper, leaving no whiteout). An
// upper unchanged since the last ingest is not ingested again. The layer
// the working state then stands on is recorded (Settle).
func (r *Run) PersistOnto(v *vfs.Vault) error {
	print, trusted := upperPrint(r.upper())
	if trusted && print == r.printed && r.onto {
		return r.Settle(v)
	}
	r.printed = [32]byte{}
	var st IngestStats
	var now map[string]sig
	err := v.Update(func(tx *vfs.Tx) error {
		var err error
		if st, now, err = IngestOnto(tx, r.upper(), r.pending.Format, r.paths); err != nil {
			return err
		}
		for _, p := range gone(r.paths, now) {
			if _, err := tx.Remove(p, true, true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.paths, r.upperStats, r.onto = now, st, true
	if trusted {
		r.printed = print
	}
	return r.Settle(v)
}

// Settle records the layer v's working state stands on as the run's
// last persisted one (pending.Persisted), after whatever froze layers
// since the last look (a checkpoint, a seal, a prune's compaction):
// Finish, Reset and Recover ingest over the base again from a working
// state that stands on it (vfs.UpdateOver's also), and Recover knows the
// run is pending while it does.
func (r *Run) Settle(v *vfs.Vault) error {
	ls, err := v.StateLayers("")
	if err != nil {
		return err
	}
	if len(ls) < 2 || ls[0].Frozen || ls[1].Layer == r.pending.Base || ls[1].Layer == r.pending.Persisted {
		return nil
	}
	r.pending.Persisted = ls[1].Layer
	return r.writePending()
}

// Unsettled reports whether the last persist saw names written too
// recently to trust (upperPrint's racy check), so that the next one reads
// them again, and how long until they can be trusted.
func (r *Run) Unsettled() (time.Duration, bool) {
	return racyWindow + 10*time.Millisecond, r.printed == [32]byte{}
}

// UpperSize is the entries (files, dirs, whiteouts) and the file bytes
// the upper held at the last ingest: what a PersistOnto stats again, and
// a Persist or the final ingest writes again.
func (r *Run) UpperSize() (int, int64) {
	if !r.onto {
		s := r.upperStats
		return s.Written + s.Dirs + s.Deleted, s.Bytes
	}
	var b int64
	for _, g := range r.paths {
		if g.mode&unix.S_IFMT == unix.S_IFREG {
			b += int64(g.size)
		}
	}
	return len(r.paths), b
}

// gone lists the paths of the upper before that it no longer holds, each
// to remove: none below another (its removal takes them), and none below
// a name the upper now holds as other than a directory (the ingest
// replaced that name, and what it held, already; and a path through it
// would lead elsewhere, through a symlink).
func gone(before, now map[string]sig) []string {
	var out []string
	for p := range before {
		if _, ok := now[p]; ok {
			continue
		}
		keep := true
		for d := path.Dir(p); d != "/" && keep; d = path.Dir(d) {
			g, held := now[d]
			_, wasGone := before[d]
			keep = (held && g.isDir()) || (!held && !wasGone)
		}
		if keep {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
