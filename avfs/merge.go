package avfs

import (
	"context"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// OnConflict says what a merge does with a path both sides changed
// differently.
type OnConflict string

func (o OnConflict) String() string { return string(o) }

// The conflict policies; "" is ConflictFail.
const (
	ConflictFail    OnConflict = "fail"    // change nothing when anything conflicts
	ConflictOurs    OnConflict = "ours"    // keep the target's version
	ConflictTheirs  OnConflict = "theirs"  // take the source's version
	ConflictMarkers OnConflict = "markers" // git-style markers in text files; the target's version otherwise
)

// ConflictKind classifies a MergeConflict.
type ConflictKind string

func (k ConflictKind) String() string { return string(k) }

// The kinds of merge conflict.
const (
	BothModified ConflictKind = "both_modified"
	ModifyDelete ConflictKind = "modify_delete"
	AddAdd       ConflictKind = "add_add"
	TypeConflict ConflictKind = "type_changed"
)

// MergeOptions are the settings of a merge.
type MergeOptions struct {
	OnConflict OnConflict
	DryRun     bool // report what would be applied and what conflicts; change nothing
}

// MergeResult is what a merge did, or with DryRun would do.
type MergeResult struct {
	Source    string
	Target    string
	Base      string // vault:NAME#LAYER, the common ancestor state
	Applied   []MergeApplied
	Conflicts []MergeConflict
	// Checkpoint is the target's checkpoint taken before it changed
	// (RestoreCheckpoint of it undoes the merge); "" when nothing changed.
	Checkpoint string
	Merged     bool // the target holds the merge (false: a dry run, conflicts with ConflictFail, or nothing to do)
	DryRun     bool
}

// MergeApplied is one path a merge changed in the target. Kind is a
// ChangeKind, or "merged" (lines of both sides) or "markers".
type MergeApplied struct {
	Path string
	Kind string
}

// MergeConflict is one path both sides changed differently; Ours and
// Theirs say what each side did there (added, modified, deleted,
// mode_changed, type_changed).
type MergeConflict struct {
	Path   string
	Kind   ConflictKind
	Ours   ChangeKind
	Theirs ChangeKind
}

// Merge merges the working state of vault src into vault into (src's
// parent when into is ""), from their common ancestor, as `avfs vault
// merge` does: see Vault.Merge.
func (h *Home) Merge(ctx context.Context, src, into string, opts *MergeOptions) (*MergeResult, error) {
	if err := stopped(ctx, "vault merge"); err != nil {
		return nil, err
	}
	s, err := h.Open(ctx, src)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if into, err = vfs.MergeTarget(s.v, into); err != nil {
		return nil, wrapErr(err)
	}
	dst, err := h.Open(ctx, into)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	return dst.Merge(ctx, s, opts)
}

// Merge merges the working state of src into this vault's, from their
// common ancestor (a fork and its parent, or two forks of one vault).
// Paths only src changed take src's version; the same change on both
// sides is no conflict; text files both changed merge by lines; other
// conflicts follow opts.OnConflict. This vault is checkpointed first and
// changed in one transaction. Extended attributes and hard links are not
// merged.
func (v *Vault) Merge(ctx context.Context, src *Vault, opts *MergeOptions) (*MergeResult, error) {
	if err := stopped(ctx, "vault merge"); err != nil {
		return nil, err
	}
	var o MergeOptions
	if opts != nil {
		o = *opts
	}
	if o.OnConflict == "" {
		o.OnConflict = ConflictFail
	}
	if _, err := vfs.MergeTarget(src.v, v.Name()); err != nil {
		return nil, wrapErr(err)
	}
	r, err := vfs.Merge(src.v, v.v, vfs.OnConflict(o.OnConflict), o.DryRun)
	if err != nil {
		return nil, wrapErr(err)
	}
	out := &MergeResult{Source: r.Source, Target: r.Target, Base: r.Base, Merged: r.Merged, DryRun: r.DryRun,
		Applied: make([]MergeApplied, len(r.Applied)), Conflicts: make([]MergeConflict, len(r.Conflicts))}
	if r.Checkpoint != nil {
		out.Checkpoint = *r.Checkpoint
	}
	for i, a := range r.Applied {
		out.Applied[i] = MergeApplied{Path: a.Path, Kind: a.Kind}
	}
	for i, c := range r.Conflicts {
		out.Conflicts[i] = MergeConflict{Path: c.Path, Kind: ConflictKind(c.Kind), Ours: ChangeKind(c.Ours), Theirs: ChangeKind(c.Theirs)}
	}
	return out, nil
}
