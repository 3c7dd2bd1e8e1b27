package engines

import (
	"fmt"

	"github.com/agentvfs/agentvfs/internal/kv"
)

var _ kv.Syncer = (*handle)(nil)

// DeferSync implements kv.Syncer for engines that do; for the others it
// returns an error wrapping kv.ErrNoDeferredSync. The setting belongs to
// the shared engine, so it applies to every handle on the file in this
// process.
func (h *handle) DeferSync(on bool) error {
	if h.closed.Load() {
		return kv.ErrClosed
	}
	s, ok := h.s.eng.(kv.Syncer)
	if !ok {
		return fmt.Errorf("%s: %w", h.s.eng.Name(), kv.ErrNoDeferredSync)
	}
	return s.DeferSync(on)
}

// Sync implements kv.Syncer. An engine without deferred sync syncs every
// commit, so there is nothing to do.
func (h *handle) Sync() error {
	if h.closed.Load() {
		return kv.ErrClosed
	}
	if s, ok := h.s.eng.(kv.Syncer); ok {
		return s.Sync()
	}
	return nil
}

var _ kv.Batcher = (*handle)(nil)

// Batch implements kv.Batcher for engines that do; for the others it
// returns an error wrapping kv.ErrNoBatch, and callers fall back to one Update per change.
func (h *handle) Batch() (kv.Batch, error) {
	if h.closed.Load() {
		return nil, kv.ErrClosed
	}
	b, ok := h.s.eng.(kv.Batcher)
	if !ok {
		return nil, fmt.Errorf("%s: %w", h.s.eng.Name(), kv.ErrNoBatch)
	}
	return b.Batch()
}
