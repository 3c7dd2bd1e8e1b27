package fusefs

import (
	"errors"
	"log"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// store is the mount's one way to its vault. Every change goes into an
// open batch (vfs.Batch): a create, a rename or a write-back costs its own
// writes, and the batch is committed at most commitAfter after its first
// change, after maxSteps changes, on fsync and when the mount stops. A
// commit per change cost about 0.2 ms, four times the change itself.
//
// Reads made while a batch is open go through it, so they see its changes;
// otherwise they use the vault's read connections and run side by side.
// Other processes (the CLI, a proxy's checkpoint) see the last commit.
//
// A crash of the mount process loses the open batch, at most commitAfter
// of changes, and leaves the vault as of the last commit. fsync(2) commits
// and syncs. A failed commit loses the batch's changes: it is logged, and
// the next fsync reports it, as a disk reports a failed write-back.
//
// An engine without batches (bbolt) commits every change on its own.
type store struct {
	v      *vfs.Vault
	logger *log.Logger

	mu       sync.Mutex // serializes the batch; held across each of its steps
	batching bool       // the engine has batches
	b        *vfs.Batch // nil when no batch is open
	steps    int
	timer    *time.Timer
	failed   error      // a commit that failed, reported by the next sync
	gc       *collector // nil for a read-only mount

	used atomic.Uint64 // counts the calls, for an idle timeout
	// corrupt holds the messages of the CorruptVault errors logged, so
	// that a damaged chunk read again and again is logged once.
	corrupt sync.Map
}

// errno is the FUSE reply to a model error. One that maps to EIO is
// unexpected and logged, a damaged chunk once.
func (s *store) errno(op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	e := errs.Errno(err)
	if e != syscall.EIO || s.logger == nil {
		return e
	}
	if errs.Is(err, errs.CorruptVault) {
		if _, seen := s.corrupt.LoadOrStore(err.Error(), true); seen {
			return e
		}
	}
	s.logger.Printf("%s: %v", op, err)
	return e
}

// activity changes whenever the store is used: every request the mount
// serves from the vault, every persist and every control op.
func (s *store) activity() uint64 { return s.used.Load() }

// How long and how large a batch grows before it is committed. A commit
// writes every page the batch dirtied, and the changes of a burst touch
// the same pages again and again: against 10 ms, 100 ms took 5–10% off a
// git round and off creating 10,000 files, in alternating runs. Buffered
// file data already waits up to idleFlush before it is persisted, so the
// window a crash of the server can lose stays set by that.
const (
	commitAfter = 100 * time.Millisecond
	maxSteps    = 4096
)

func newStore(v *vfs.Vault, logger *log.Logger, batching bool) *store {
	return &store{v: v, logger: logger, batching: batching}
}

// view runs fn read-only on the latest state of the vault, uncommitted
// changes included. It answers from the vault's read cache when it can
// (vfs.Vault.ViewCached), so fn may run twice and must have no effect
// beyond what it returns.
func (s *store) view(fn func(*vfs.Tx) error) error {
	s.used.Add(1)
	s.mu.Lock()
	if s.b != nil {
		defer s.mu.Unlock()
		return s.b.ViewCached(fn)
	}
	s.mu.Unlock()
	return s.v.ViewCached(fn)
}

// update runs fn as one change: on error nothing of it is kept.
func (s *store) update(fn func(*vfs.Tx) error) error {
	s.used.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.batching {
		return s.updateAlone(fn)
	}
	if s.b == nil {
		b, err := s.v.Batch()
		if errors.Is(err, kv.ErrNoBatch) {
			s.batching = false
			return s.updateAlone(fn)
		}
		if err != nil {
			return err
		}
		s.b, s.steps = b, 0
		s.timer = time.AfterFunc(commitAfter, func() { _ = s.commit() })
	}
	err := s.b.Update(fn)
	s.steps++
	if s.steps >= maxSteps {
		s.commitLocked()
	}
	return err
}

// updateAlone runs fn in its own transaction, without a batch.
func (s *store) updateAlone(fn func(*vfs.Tx) error) error {
	err := s.v.Update(fn)
	if err == nil {
		s.gc.committed()
	}
	return err
}

// commit commits the open batch, if any; it returns the error of a
// commit that failed since the last call.
func (s *store) commit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked()
	err := s.failed
	s.failed = nil
	return err
}

func (s *store) commitLocked() {
	if s.b == nil {
		return
	}
	s.timer.Stop()
	err := s.b.Commit()
	s.b = nil
	if err != nil {
		if s.logger != nil {
			s.logger.Printf("committing %d changes: %v", s.steps, err)
		}
		s.failed = errors.Join(s.failed, err)
		return
	}
	s.gc.committed()
}

// sync is the durability barrier: every change made before it is
// committed and on disk when it returns nil.
func (s *store) sync() error {
	err := s.commit()
	if serr := s.v.Sync(); err == nil {
		err = serr
	}
	return err
}

// exclusive commits the open batch and runs fn with no change of the
// mount's in between: fn may use the vault's own transactions (a
// checkpoint, a diff) as if the mount were not there.
func (s *store) exclusive(fn func(v *vfs.Vault) error) error {
	s.used.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked()
	if err := s.failed; err != nil {
		s.failed = nil
		return err
	}
	return fn(s.v)
}
