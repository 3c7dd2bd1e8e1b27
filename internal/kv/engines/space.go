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
// handle on the file waits for it.
func (h *handle) Rewrite() error {
	r, err := h.reclaimer()
	if err != nil {
		return err
	}
	return r.Rewrite()
}
