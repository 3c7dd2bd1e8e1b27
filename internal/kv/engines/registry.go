package engines

import (
	"sync"
	"sync/atomic"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// reg holds the engines open in this process. Its mutex is held across an
// engine's open, so two Opens of one file cannot both open it; the cost is
// that a slow open (a bolt file locked by another process) delays other
// Opens for up to that engine's timeout.
var reg = registry{open: map[fileKey]*shared{}}

type registry struct {
	mu   sync.Mutex
	open map[fileKey]*shared
}

// shared is one open engine and the number of handles on it. refs is
// guarded by registry.mu.
type shared struct {
	id   fileKey
	eng  kv.Engine
	refs int
}

// add registers a freshly opened engine; reg.mu must be held.
func (r *registry) add(id fileKey, eng kv.Engine) kv.Engine {
	s := &shared{id: id, eng: eng, refs: 1}
	r.open[id] = s
	return &handle{s: s}
}

// share returns a new handle on the engine open for id, or nil; reg.mu
// must be held.
func (r *registry) share(id fileKey) kv.Engine {
	s := r.open[id]
	if s == nil {
		return nil
	}
	s.refs++
	return &handle{s: s}
}

// release drops one reference and closes the engine with the last one.
// The close runs outside the lock: it waits for running transactions,
// whose code may itself open vaults.
func (r *registry) release(s *shared) error {
	r.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last && r.open[s.id] == s {
		delete(r.open, s.id)
	}
	r.mu.Unlock()
	if !last {
		return nil
	}
	return s.eng.Close()
}

// handle is what Create and Open return: one reference to a shared engine.
type handle struct {
	s      *shared
	closed atomic.Bool
}

var _ kv.Engine = (*handle)(nil)

func (h *handle) View(fn func(kv.Tx) error) error {
	if h.closed.Load() {
		return kv.ErrClosed
	}
	return h.s.eng.View(fn)
}

func (h *handle) Update(fn func(kv.Tx) error) error {
	if h.closed.Load() {
		return kv.ErrClosed
	}
	return h.s.eng.Update(fn)
}

func (h *handle) Name() string { return h.s.eng.Name() }

var _ kv.Capable = (*handle)(nil)

// Capabilities implements kv.Capable with the shared engine's; an engine
// that declares none can do nothing beyond the kv contract.
func (h *handle) Capabilities() kv.Capabilities {
	if c, ok := h.s.eng.(kv.Capable); ok {
		return c.Capabilities()
	}
	return kv.Capabilities{}
}
func (h *handle) Path() string { return h.s.eng.Path() }

// Close releases this handle's reference; a second Close of the same
// handle returns kv.ErrClosed and releases nothing.
func (h *handle) Close() error {
	if h.closed.Swap(true) {
		return kv.ErrClosed
	}
	return reg.release(h.s)
}
