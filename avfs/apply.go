package avfs

import (
	"context"

	"github.com/agentvfs/agentvfs/internal/apply"
	"github.com/agentvfs/agentvfs/internal/refs"
)

// ApplyOptions are the settings of Apply.
type ApplyOptions struct {
	// From is the REF of the state the host directory holds; "" is the
	// vault's recorded origin (the checkpoint `avfs vault create --from`
	// or `avfs import` took), or its parent's for a fork.
	From string
	To   string // the REF of the state to write; "" is "@", the working state
	// DryRun reports what would be written and what conflicts, and
	// writes nothing.
	DryRun bool
	// Force overwrites host files that no longer hold what From held
	// (conflicts otherwise).
	Force bool
}

// ApplyResult is what Apply did, or with DryRun would do.
type ApplyResult struct {
	From, To  string // the canonical REFs
	HostDir   string // absolute
	DryRun    bool
	Applied   []ApplyEntry
	Conflicts []ApplyNote // host files that changed since From, left alone
	Skipped   []ApplyNote // paths already as To, or of types apply does not write
}

// ApplyEntry is one path Apply wrote.
type ApplyEntry struct {
	Path string
	Kind ChangeKind
}

// ApplyNote is one path Apply left alone, and why.
type ApplyNote struct {
	Path   string
	Reason string
}

// Apply writes the changes between two states of vault ("" is the current
// vault; REFs without a vault name it) into the host directory hostDir,
// as `avfs apply` does: a host file that no longer holds what From held
// is a conflict, left alone unless Force; modes are kept (not setuid or
// setgid); no host symlink is followed and nothing is written outside
// hostDir. Applying `avfs diff FROM TO --patch` with git apply gives the
// same tree.
func (h *Home) Apply(ctx context.Context, vault, hostDir string, opts *ApplyOptions) (*ApplyResult, error) {
	if err := stopped(ctx, "apply"); err != nil {
		return nil, err
	}
	var o ApplyOptions
	if opts != nil {
		o = *opts
	}
	r := h.resolver(vault)
	defer r.Close()
	var err error
	if o.From == "" {
		if o.From, err = apply.Origin(r); err != nil {
			return nil, wrapErr(err)
		}
	}
	if o.To == "" {
		o.To = refs.Working
	}
	from, err := r.Resolve(o.From)
	if err != nil {
		return nil, wrapErr(err)
	}
	to, err := r.Resolve(o.To)
	if err != nil {
		return nil, wrapErr(err)
	}
	res, err := apply.Apply(ctx, hostDir, from, to, apply.Options{DryRun: o.DryRun, Force: o.Force})
	if err != nil {
		return nil, wrapErr(err)
	}
	out := &ApplyResult{From: res.From, To: res.To, HostDir: res.HostDir, DryRun: res.DryRun,
		Applied: make([]ApplyEntry, len(res.Applied)), Conflicts: notes(res.Conflicts), Skipped: notes(res.Skipped)}
	for i, e := range res.Applied {
		out.Applied[i] = ApplyEntry{Path: e.Path, Kind: ChangeKind(e.Kind)}
	}
	return out, nil
}

func notes(ns []apply.Note) []ApplyNote {
	out := make([]ApplyNote, len(ns))
	for i, n := range ns {
		out[i] = ApplyNote{Path: n.Path, Reason: n.Reason}
	}
	return out
}

// resolver resolves REFs in this home, a REF without a vault naming vault
// ("" is the current vault).
func (h *Home) resolver(vault string) *refs.Resolver {
	return refs.NewResolver(h.reg, func() (string, error) {
		if vault != "" {
			return vault, nil
		}
		return h.reg.Current()
	})
}
