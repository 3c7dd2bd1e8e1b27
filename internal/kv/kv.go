// Package kv is the one small storage interface under every avfs vault: an
// ordered, transactional key-value store kept in a single file, or in a
// table of a database server.
//
// Every engine (SQLite, bbolt, PostgreSQL, in-memory) implements Engine, and the same
// conformance suite (package kvtest) runs against each of them. Nothing above
// this package knows which engine holds a vault.
package kv

import (
	"errors"
)

// Sentinel errors shared by every engine. Engines wrap them, so callers test
// with errors.Is.
var (
	// ErrNotFound is returned by Tx.Get when the key is absent. It is never
	// wrapped by engines, so the hot path can compare it directly.
	ErrNotFound = errors.New("kv: key not found")
	// ErrReadOnly is returned by Put and Delete inside a View transaction.
	ErrReadOnly = errors.New("kv: write in a read-only transaction")
	// ErrClosed is returned by every call on a closed engine.
	ErrClosed = errors.New("kv: engine closed")
	// ErrForeign means the file exists but is not a database of a known engine.
	ErrForeign = errors.New("kv: not a database file of a known engine")
	// ErrCorrupt means the file claims to be a known engine's database but
	// cannot be read as one (truncated, overwritten, damaged).
	ErrCorrupt = errors.New("kv: database file is corrupt")
	// ErrBusy means another writer held the database for longer than the
	// engine's busy timeout.
	ErrBusy = errors.New("kv: database is locked by another writer")
	// ErrNoBatch is returned by Batch on an engine without batches.
	ErrNoBatch = errors.New("kv: the engine has no batches")
	// ErrEmptyKey is returned by Put for a zero-length key.
	ErrEmptyKey = errors.New("kv: empty key")
	// ErrUnavailable means a store behind a network could not be reached:
	// a wrong address, a server that is down, credentials it refused.
	ErrUnavailable = errors.New("kv: store unavailable")
	// ErrNewerFormat means the store was written in a format this build
	// does not know (a newer avfs).
	ErrNewerFormat = errors.New("kv: store format is newer than this build")
)

// Engine is an ordered key-value store in one file (or one table).
//
// Write transactions are serialized: within a process by the engine, across
// processes by the engine's file locking (a server engine's lock). A write transaction is atomic and
// durable once Update returns nil; a crash at any point leaves either all or
// none of it. Read transactions see a consistent snapshot, taken when View
// is called.
//
// Do not call Update from inside another View or Update on the same engine:
// it may deadlock (a second writer waits for the first; bbolt's commit may
// wait for the open reader).
type Engine interface {
	// View runs fn in a read-only transaction. Put and Delete inside it
	// return ErrReadOnly. The error fn returns is returned unchanged.
	View(fn func(Tx) error) error
	// Update runs fn in a read-write transaction and commits it when fn
	// returns nil; when fn returns an error (or panics) nothing of it is kept
	// and that error is returned unchanged. A commit failure returns an error
	// wrapping ErrBusy when another writer held the file for too long.
	Update(fn func(Tx) error) error
	// Name is the engine's registered name ("sqlite", "bolt", "mem").
	Name() string
	// Path is the file the engine stores into ("" for memory engines).
	Path() string
	// Close releases the file. Calls after Close return ErrClosed.
	Close() error
}

// Tx is one transaction. It must not be used after the View or Update call
// that created it has returned (engines then return an error wrapping
// ErrClosed), nor from more than one goroutine at a time.
type Tx interface {
	// Get returns the value stored under key, or ErrNotFound (unwrapped). An
	// empty value comes back as a non-nil, zero-length slice. The returned
	// slice is only valid until the transaction ends, and may be the
	// engine's own memory: copy it to keep it, never modify it.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key k with start <= k < end, in ascending byte
	// order. A nil end means no upper bound. fn returns false to stop early;
	// an error from fn stops the scan and is returned. The slices passed to fn
	// are only valid during that call and must not be modified. Put and
	// Delete called by fn during the scan return an error; reads (Get, a
	// nested Scan) are fine.
	Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error
	// Put stores value under key, replacing any previous value. Keys must not
	// be empty (ErrEmptyKey); values may be empty. Put copies both slices.
	Put(key, value []byte) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(key []byte) error
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, for use as Scan's end bound; nil when no such key exists (a prefix
// of only 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Batcher is implemented by engines that can keep one write transaction
// open across many small changes and undo any one of them on its own
// (SQLite savepoints). The FUSE mount uses it so that creating a file
// costs its own writes, not a commit: it commits a batch every few
// milliseconds, on fsync and when it stops.
type Batcher interface {
	// Batch begins a write transaction that stays open until Commit or
	// Rollback. It holds the engine's write lock all that time: Update
	// calls, in this process and in others, wait for it.
	Batch() (Batch, error)
}

// Batch is an open write transaction made of steps. A crash before Commit
// keeps none of it. It is not safe for concurrent use.
type Batch interface {
	// Step runs fn as one step: when fn returns an error (or panics),
	// everything fn changed is undone, the batch stays open and the error
	// is returned unchanged.
	Step(fn func(Tx) error) error
	// Read runs fn read-only on the batch's state, steps not yet committed
	// included.
	Read(fn func(Tx) error) error
	// Commit keeps every step, as Update's commit would, and ends the batch.
	Commit() error
	// Rollback drops every step and ends the batch.
	Rollback() error
}
