package avfs

import (
	"context"

	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Change is one path that differs between two states.
type Change struct {
	Path string
	Kind ChangeKind
	Type FileType // the file's type after the change (before it, for a deletion)
	// From is the old path of a Renamed path ("" otherwise).
	From       string
	SizeBefore int64 // bytes of a regular file before the change; 0 for none
	SizeAfter  int64 // and after it
}

// ChangeKind classifies a Change.
type ChangeKind string

func (k ChangeKind) String() string { return string(k) }

// The kinds of change. Time stamps alone are not a change.
const (
	Added       ChangeKind = "added"
	Modified    ChangeKind = "modified"
	Deleted     ChangeKind = "deleted"
	TypeChanged ChangeKind = "type_changed" // the path now holds another type of file
	ModeChanged ChangeKind = "mode_changed" // permissions or owner only
	// Renamed is a deleted file and an added one with the same content,
	// or similar content by lines, paired as `avfs diff` pairs them (every
	// Diff and Patch here) and as a proxy run's changes (Envelope) are.
	Renamed ChangeKind = "renamed"
)

// FileType is the type of a file of a vault.
type FileType string

func (t FileType) String() string { return string(t) }

// The file types a vault holds.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
	TypeFifo    FileType = "fifo"
	TypeSocket  FileType = "socket"
	TypeChar    FileType = "char"
	TypeBlock   FileType = "block"
)

func changes(cs []vfs.Change) []Change {
	out := make([]Change, len(cs))
	for i, c := range cs {
		out[i] = Change{Path: c.Path, Kind: ChangeKind(c.Kind), Type: FileType(c.Type), From: c.From, SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter}
	}
	return out
}

// State names a state of a vault: its working state (Checkpoint "") or
// one of its checkpoints; with After, the state just after that
// checkpoint (for a proxy run's checkpoint: what the run left).
type State struct {
	Vault      *Vault
	Checkpoint string
	After      bool
}

// Diff lists the paths that differ between two states, sorted by path,
// renames paired (Renamed). The states may belong to different vaults (a
// fork and its parent). Only the layers that differ are read; file
// contents are compared by hash, and read only to pair a few deleted and
// added files that differ as renames with edits.
func Diff(ctx context.Context, from, to State) ([]Change, error) {
	if err := stopped(ctx, "diff"); err != nil {
		return nil, err
	}
	f, err := from.ref()
	if err != nil {
		return nil, wrapErr(err)
	}
	t, err := to.ref()
	if err != nil {
		return nil, wrapErr(err)
	}
	cs, _, err := vfs.ContentDiff(f, t, false)
	if err != nil {
		return nil, wrapErr(err)
	}
	return changes(cs), nil
}

func (s State) ref() (vfs.StateRef, error) {
	r := vfs.StateRef{Vault: s.Vault.v, Checkpoint: s.Checkpoint, After: s.After && s.Checkpoint != ""}
	return r, r.Check()
}

// FilePatch is one change in git's patch format.
type FilePatch struct {
	Path string
	// Text is what `git apply` takes; "" when git keeps nothing of the
	// path (a directory, a device, a mode other than the execute bit).
	Text   string
	Binary bool // Text is a git binary patch ("Binary files … differ" over 16 MiB)
	// Insertions and Deletions count the lines changed.
	Insertions, Deletions int
}

// Patch returns the changes between two states as git patches, sorted by
// path: applied with `git apply` to a tree holding from, they make to.
// Only the changed paths are read.
func Patch(ctx context.Context, from, to State) ([]FilePatch, error) {
	if err := stopped(ctx, "diff"); err != nil {
		return nil, err
	}
	f, err := from.ref()
	if err != nil {
		return nil, wrapErr(err)
	}
	t, err := to.ref()
	if err != nil {
		return nil, wrapErr(err)
	}
	return patches(f, t)
}

func patches(f, t vfs.StateRef) ([]FilePatch, error) {
	_, ps, err := vfs.ContentDiff(f, t, true)
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]FilePatch, len(ps))
	for i, p := range ps {
		out[i] = FilePatch{Path: p.Path, Text: p.Text, Binary: p.Binary, Insertions: p.Insertions, Deletions: p.Deletions}
	}
	return out, nil
}

// Diff lists what changed in this vault's states from REF from to REF to
// (see FSAt for REFs; "" is "@", the working state): v.Diff(ctx,
// "before", "") is what changed since checkpoint "before", v.Diff(ctx,
// "run:ID", "run:ID^after") what proxy run ID changed. A REF may name
// another vault (vault:NAME, vault:NAME@CHECKPOINT).
func (v *Vault) Diff(ctx context.Context, from, to string) ([]Change, error) {
	return refDiff(ctx, v.resolver(), from, to)
}

// Patch returns the changes from REF from to REF to as git patches, as
// Vault.Diff lists them.
func (v *Vault) Patch(ctx context.Context, from, to string) ([]FilePatch, error) {
	return refPatch(ctx, v.resolver(), from, to)
}

// Diff lists the paths that differ between the states REFs from and to
// name, sorted by path; a REF without a vault (CHECKPOINT, @, "") is of the
// home's current vault. It is `avfs diff FROM TO`.
func (h *Home) Diff(ctx context.Context, from, to string) ([]Change, error) {
	return refDiff(ctx, h.resolver(""), from, to)
}

// Patch returns the changes between the states REFs from and to name as
// git patches: `avfs diff FROM TO --patch`.
func (h *Home) Patch(ctx context.Context, from, to string) ([]FilePatch, error) {
	return refPatch(ctx, h.resolver(""), from, to)
}

// resolve resolves two REFs ("" is "@") with r, checking both exist
// before anything is compared.
func resolve(ctx context.Context, r *refs.Resolver, from, to string) (f, t vfs.StateRef, err error) {
	if err := stopped(ctx, "diff"); err != nil {
		return f, t, err
	}
	var states [2]vfs.StateRef
	for i, ref := range []string{from, to} {
		if ref == "" {
			ref = refs.Working
		}
		st, err := r.Resolve(ref)
		if err != nil {
			return f, t, wrapErr(err)
		}
		states[i] = st.StateRef
	}
	return states[0], states[1], nil
}

func refDiff(ctx context.Context, r *refs.Resolver, from, to string) ([]Change, error) {
	defer r.Close()
	f, t, err := resolve(ctx, r, from, to)
	if err != nil {
		return nil, err
	}
	cs, _, err := vfs.ContentDiff(f, t, false)
	if err != nil {
		return nil, wrapErr(err)
	}
	return changes(cs), nil
}

func refPatch(ctx context.Context, r *refs.Resolver, from, to string) ([]FilePatch, error) {
	defer r.Close()
	f, t, err := resolve(ctx, r, from, to)
	if err != nil {
		return nil, err
	}
	return patches(f, t)
}
