package engines

import (
	"fmt"

	"github.com/agentvfs/agentvfs/internal/kv"
)

var (
	_ kv.Reclaimer = (*handle)(nil)
)

func (h *handle) reclaimer() (kv.Reclaimer, error) {
	if h.closed.Load() {
		return nil, kv.ErrClosed
	}
	r, ok := h.s.eng.(kv.Reclaimer)
	if !ok {
		return nil, fmt.Errorf("%s: %w", h.s.eng.Name(), kv.ErrNoReclaim)
	}
	return r, nil
}

// Space implements kv.Spacer for engines that do; for the others it
// returns an error wrapping kv.ErrNoReclaim.
func (h *handle) Space() (kv.Space, error) {
	r, err := h.reclaimer()
	if err != nil {
		return kv.Space{}, err
	}
	return r.Space()
}

// Reclaim implements kv.Reclaimer for engines that do; for the others it
// returns an error wrapping kv.ErrNoReclaim.
func (h *handle) Reclaim(limit int64) (int64, error) {
	r, err := h.reclaimer()
	if err != nil {
		return 0, err
	}
	return r.Reclaim(limit)
}

// Rewrite implements kv.Reclaimer for engines that do; for the others it
// returns an error wrapping kv.ErrNoReclaim. The engine is shared: every
// handle on the file waits for it. A rewrite that put a new file in place
// of the old one (bbolt) moves the engine to the new file's identity, so
// later Opens of the path share it again. (The registry's lock is not
// held across the rewrite: a transaction of the engine may open a fork's
// parent, and would wait for it.)
func (h *handle) Rewrite() error {
	r, err := h.reclaimer()
	if err != nil {
		return err
	}
	if err := r.Rewrite(); err != nil {
		return err
	}
	id, err := fileID(h.s.eng.Path())
	if err != nil {
		return err
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if id != h.s.id && reg.open[h.s.id] == h.s {
		delete(reg.open, h.s.id)
		h.s.id = id
		reg.open[id] = h.s
	}
	return nil
}
