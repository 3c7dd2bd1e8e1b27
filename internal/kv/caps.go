package kv

import (
	"context"
	"time"
)

// Capabilities says what an engine can do, so that code above kv asks
// what an engine does instead of which engine it is.
type Capabilities struct {
	// SharedOpen means another process may open and write the store while
	// this one holds it open (SQLite in WAL mode). When false an open store
	// is locked to its process (bbolt's flock), and a second open can only
	// wait for it.
	SharedOpen bool
	// DataFiles are the suffixes of files beside the main file that hold
	// the store's data (SQLite's "-wal"): they count in its size.
	DataFiles []string
	// SideFiles are the suffixes of the other files the engine makes
	// beside the main file (locks, indexes): removed with it, not counted.
	SideFiles []string
	// SharedPrefix, when set, says that the keys under it are one space
	// many stores share (a server engine's Shared): what a Scan of it sees
	// is theirs too, and a key there must not be freed for being unused
	// by this store alone.
	SharedPrefix []byte
}

// Capable is implemented by engines that declare their capabilities.
type Capable interface {
	Capabilities() Capabilities
}

// Leaser is implemented by engines that many hosts share, whose writers
// claim a store with a lease so that it has one writer across all of
// them.
type Leaser interface {
	// LeaseWriter claims the store for host and pid for ttl, renewed
	// until Release (the engine's default ttl when zero). It fails with an
	// error wrapping ErrBusy, naming the holder, while another holder's
	// lease has not expired.
	LeaseWriter(ctx context.Context, host string, pid int, ttl time.Duration) (Lease, error)
}

// Lease is a writer's claim on a store.
type Lease interface {
	// Lost is closed when another holder took the lease after it expired
	// (it could not be renewed in time): this holder must stop writing.
	Lost() <-chan struct{}
	// Release gives the lease up at once.
	Release() error
}
