package proxy

import (
	"github.com/agentvfs/agentvfs/internal/errs"
)

// How much of a run's change list the envelope carries (--changes). A
// run that creates a dependency tree changes tens of thousands of paths:
// listed whole, its envelope would be megabytes that an agent pays for in
// tokens, so the list is cut at ChangesLimit and the summary stays.
const (
	ChangesFull    = "full"    // the list up to ChangesLimit entries, and the summary
	ChangesSummary = "summary" // the summary only
	ChangesNone    = "none"    // no diff is taken: no list, no summary
)

// ChangesLimit is how many changes --changes full lists; past it the list
// is cut (result.changes_truncated) and changed_files still counts all.
const ChangesLimit = 10000

// Summary counts a run's changes by kind and the bytes they added and
// removed, from the change list alone: sizes come from the inodes the
// diff compared, so no file is read. A modified, renamed, mode_changed or
// type_changed path adds its growth to BytesAdded or its shrinkage to
// BytesRemoved; mode_changed and type_changed count as Modified.
// Directories have no size.
type Summary struct {
	Added        int   `json:"added"`
	Modified     int   `json:"modified"`
	Deleted      int   `json:"deleted"`
	Renamed      int   `json:"renamed"`
	BytesAdded   int64 `json:"bytes_added"`
	BytesRemoved int64 `json:"bytes_removed"`
}

// summarizeChanges sums a change list.
func summarizeChanges(changes []Change) *Summary {
	s := &Summary{}
	for _, c := range changes {
		before, after := c.SizeBefore, c.SizeAfter
		switch c.Kind {
		case "added":
			s.Added++
			before = 0
		case "deleted":
			s.Deleted++
			after = 0
		case "renamed":
			s.Renamed++
		default:
			s.Modified++
		}
		if after > before {
			s.BytesAdded += after - before
		} else {
			s.BytesRemoved += before - after
		}
	}
	return s
}

// checkChanges validates --changes, "" being full.
func checkChanges(mode string) (string, error) {
	switch mode {
	case "":
		return ChangesFull, nil
	case ChangesFull, ChangesSummary, ChangesNone:
		return mode, nil
	}
	return "", errs.New(errs.InvalidInput, "proxy exec", "--changes must be full, summary or none, not %q", mode)
}

// shape cuts a run's summary to what mode asks for, once: the server of
// a mount does it before sending, and the run again in case the server
// did not (an older one), which then is a no-op.
func (s *summary) shape(mode string, limit int) {
	if s.Summary == nil {
		s.Summary, s.Total = summarizeChanges(s.Changes), len(s.Changes)
	}
	switch {
	case mode == ChangesSummary:
		s.Changes = nil
	case len(s.Changes) > limit:
		s.Changes, s.Truncated = s.Changes[:limit:limit], true
	}
}
