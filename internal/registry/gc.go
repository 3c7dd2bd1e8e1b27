package registry

import (
	"fmt"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// GCStats is what Home.GC did: the vault's collection and, in a store,
// the vaults it swept that killed creates or deletes had left unnamed.
type GCStats struct {
	vfs.GCStats
	UnnamedSwept int `json:"unnamed_swept"`
}

// GC collects the garbage of open vault v (vfs.Vault.GC). The chunks of a
// vault in a store are in the space all its vaults share: GC then first
// sweeps the vaults no name points to (SweepUnnamed, UnnamedAge), and
// frees the chunks that no chunk map of any vault of the store names
// (vfs.CollectShared), and fails, freeing none, when it cannot read every
// vault of the store.
func (h *Home) GC(v *vfs.Vault) (GCStats, error) {
	var st GCStats
	var err error
	st.GCStats, err = v.GC()
	if err != nil || h.Store == "" {
		return st, err
	}
	if st.UnnamedSwept, err = h.SweepUnnamed(UnnamedAge); err != nil {
		return st, err
	}
	names, err := h.place.names()
	if err != nil {
		return st, err
	}
	var all []*vfs.Vault
	defer func() {
		for _, o := range all {
			o.Close()
		}
	}()
	for _, name := range names {
		o, err := h.openAlone(name)
		if errs.Is(err, errs.VaultNotFound) {
			continue // deleted meanwhile: its chunks are garbage
		}
		if err != nil {
			return st, &errs.Error{Kind: errs.KindOf(err), Op: "gc", Vault: name,
				Err:  fmt.Errorf("the store's chunks are shared, and vault %q cannot be read to see which it uses: %w", name, err),
				Hint: "fix or delete that vault, then run gc again"}
		}
		all = append(all, o)
	}
	shared, err := vfs.CollectShared(all)
	st.ChunksKept = shared.ChunksKept
	st.ChunksFreed += shared.ChunksFreed
	st.BytesFreed += shared.BytesFreed
	st.LongestStep = max(st.LongestStep, shared.LongestStep)
	return st, err
}

// SweepUnnamed drops the vaults of the home's store that no name points
// to and that were created age or longer ago (store.sweep), and says how
// many; a home without a store has none. Home.GC sweeps those older than
// UnnamedAge.
func (h *Home) SweepUnnamed(age time.Duration) (int, error) {
	s, ok := h.place.(*store)
	if !ok {
		return 0, nil
	}
	n, err := s.sweep(age)
	if err != nil {
		return n, s.err("gc", "", err)
	}
	return n, nil
}
