package cli

import (
	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// refHelp is how a command's help spells out what a REF is.
const refHelp = `A REF names a state: @ (the working state), CHECKPOINT, vault:NAME,
vault:NAME@CHECKPOINT, run:ID (the state just before proxy run ID) or
run:ID^after (the state just after it).`

// atFlag adds --at REF to a command that reads the vault.
func atFlag(c *cobra.Command, at *string) {
	c.Flags().StringVar(at, "at", "", "read the state REF names instead of the working state (@, CHECKPOINT, vault:NAME[@CHECKPOINT], run:ID[^after])")
}

// resolver returns a REF resolver on the home whose selected vault is the
// command's; the caller closes it.
func (a *app) resolver() (*registry.Home, *refs.Resolver, error) {
	h, err := a.home()
	if err != nil {
		return nil, nil, err
	}
	return h, refs.NewResolver(h, func() (string, error) { return a.vaultName(h) }), nil
}

// withState runs fn on the state REF at names: the selected vault's
// working state when at is empty.
func (a *app) withState(at string, fn func(h *registry.Home, s refs.State) (any, error)) (any, error) {
	h, r, err := a.resolver()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if at == "" {
		at = refs.Working
	}
	s, err := r.Resolve(at)
	if err != nil {
		return nil, err
	}
	return fn(h, s)
}

// viewAt is view on the state REF at names.
func (a *app) viewAt(at, p string, fn func(tx *vfs.Tx) (any, error)) (any, error) {
	if at == "" {
		return a.view(p, fn)
	}
	return a.withState(at, func(_ *registry.Home, s refs.State) (res any, err error) {
		err = s.View(func(tx *vfs.Tx) error {
			res, err = fn(tx)
			return err
		})
		return res, withPath(err, cleanOr(p))
	})
}
