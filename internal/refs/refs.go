// Package refs names the states of vaults. A REF is
//
//	@                       the working state of the selected vault
//	CHECKPOINT              a checkpoint of the selected vault
//	vault:NAME              the working state of vault NAME
//	vault:NAME@CHECKPOINT   a checkpoint of vault NAME
//	run:ID                  the state just before proxy run ID (its checkpoint)
//	run:ID^after            the state just after it
//
// The command line, the library and the MCP server resolve REFs here, so
// they all read the same state for the same words.
package refs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Working is the REF of the selected vault's working state.
const Working = "@"

// afterSuffix marks the state just after a run.
const afterSuffix = "^after"

// Ref is a parsed REF. Vault is empty when the REF means the selected
// vault; Run is set for run: REFs, whose vault and checkpoint come from
// the run's record.
type Ref struct {
	Vault      string
	Checkpoint string
	Run        string
	After      bool
}

// Parse reads a REF without opening anything. A malformed one is
// InvalidInput.
func Parse(s string) (Ref, error) {
	switch {
	case s == Working:
		return Ref{}, nil
	case strings.HasPrefix(s, "run:"):
		id := strings.TrimPrefix(s, "run:")
		id, after := strings.CutSuffix(id, afterSuffix)
		if err := vfs.CheckName("run id", id); err != nil {
			return Ref{}, refErr(s, err)
		}
		return Ref{Run: id, After: after}, nil
	case strings.HasPrefix(s, "vault:"):
		name, cp, hasCP := strings.Cut(strings.TrimPrefix(s, "vault:"), "@")
		if err := registry.CheckName(name); err != nil {
			return Ref{}, refErr(s, err)
		}
		if hasCP {
			if err := vfs.CheckName("checkpoint", cp); err != nil {
				return Ref{}, refErr(s, err)
			}
		}
		return Ref{Vault: name, Checkpoint: cp}, nil
	}
	if err := vfs.CheckName("checkpoint", s); err != nil {
		return Ref{}, refErr(s, err)
	}
	return Ref{Checkpoint: s}, nil
}

func refErr(ref string, err error) error {
	return &errs.Error{Kind: errs.InvalidInput, Op: "ref", Extra: map[string]any{"ref": ref}, Err: fmt.Errorf("invalid REF %q: %w", ref, err),
		Hint: "a REF is @, CHECKPOINT, vault:NAME, vault:NAME@CHECKPOINT, run:ID or run:ID^after"}
}

// State is a resolved REF: the state to read and its canonical name
// (vault:NAME or vault:NAME@CHECKPOINT, with ^after for a run's after
// state).
type State struct {
	vfs.StateRef
	Name string
}

// Resolver resolves REFs against one home, opening each vault once. Close
// closes what it opened.
type Resolver struct {
	home *registry.Home
	// selected names the selected vault; it is asked only when a REF needs it.
	selected func() (string, error)
	open     map[string]*vfs.Vault
	given    map[string]bool // vaults the caller opened and closes itself
}

// NewResolver returns a resolver on h. selected names the vault that a REF
// without a vault means.
func NewResolver(h *registry.Home, selected func() (string, error)) *Resolver {
	return &Resolver{home: h, selected: selected, open: map[string]*vfs.Vault{}, given: map[string]bool{}}
}

// Use lends the resolver an open vault, which it uses for that name and
// does not close.
func (r *Resolver) Use(v *vfs.Vault) {
	r.open[v.Name()] = v
	r.given[v.Name()] = true
}

// Resolve turns REF s into a state. A REF naming what does not exist is
// NotFound (or CheckpointNotFound, VaultNotFound), with the REF in its
// path and message.
func (r *Resolver) Resolve(s string) (State, error) {
	ref, err := Parse(s)
	if err != nil {
		return State{}, err
	}
	if ref.Run != "" {
		if ref, err = r.run(s, ref); err != nil {
			return State{}, err
		}
	}
	if ref.Vault == "" {
		if ref.Vault, err = r.selected(); err != nil {
			return State{}, err
		}
	}
	v, ok := r.open[ref.Vault]
	if !ok {
		if v, err = r.home.Open(ref.Vault); err != nil {
			return State{}, notFound(s, err)
		}
		r.open[ref.Vault] = v
	}
	st := State{StateRef: vfs.StateRef{Vault: v, Checkpoint: ref.Checkpoint, After: ref.After}, Name: "vault:" + ref.Vault}
	if err := st.Check(); err != nil {
		return State{}, notFound(s, err)
	}
	if ref.Checkpoint != "" {
		st.Name += "@" + ref.Checkpoint
		if ref.After {
			st.Name += afterSuffix
		}
	}
	return st, nil
}

// run fills in the vault and checkpoint of a run REF from its record.
func (r *Resolver) run(s string, ref Ref) (Ref, error) {
	store, err := proxy.OpenStore(r.home)
	if err != nil {
		return ref, err
	}
	env, err := store.Get(ref.Run)
	if err != nil {
		return ref, notFound(s, err)
	}
	cp := env.Result.Checkpoint
	if cp == nil || !cp.Kept {
		return ref, &errs.Error{Kind: errs.NotFound, Op: "ref", Extra: map[string]any{"ref": s},
			Err:  fmt.Errorf("REF %q: run %s kept no checkpoint (it did not run, ran read-only, or used --checkpoint never)", s, ref.Run),
			Hint: "`avfs proxy history` lists the runs"}
	}
	ref.Vault, ref.Checkpoint = env.Request.Vault, cp.Name
	return ref, nil
}

// notFound names REF s in a lookup's error ("ref" in its JSON), keeping
// its kind: CheckpointNotFound and VaultNotFound are NotFounds of a kind
// the JSON contract already names.
func notFound(s string, err error) error {
	var e *errs.Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Extra = map[string]any{}
	for k, v := range e.Extra {
		c.Extra[k] = v
	}
	c.Extra["ref"] = s
	c.Err = fmt.Errorf("REF %q: %w", s, e.Err)
	return &c
}

// Close closes the vaults the resolver opened.
func (r *Resolver) Close() error {
	var first error
	for name, v := range r.open {
		if r.given[name] {
			continue
		}
		if err := v.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.open = map[string]*vfs.Vault{}
	return first
}
