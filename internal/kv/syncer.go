package kv

import "errors"

// ErrNoDeferredSync is returned by DeferSync on an engine whose commits
// cannot be made cheaper than fully synced ones.
var ErrNoDeferredSync = errors.New("kv: the engine cannot defer the sync of its commits")

// Syncer is implemented by engines that can trade the durability of each
// commit for speed, and restore it with an explicit barrier. The FUSE
// mount uses it to persist write-back batches cheaply and pay for an
// fsync only when a program asks for one.
//
// With deferred sync on, a commit that Update returned is durable against
// a crash of the process (it is in the operating system's hands, and the
// next open recovers it) but not against a crash of the machine or a power
// cut: the last commits before one may be lost, never torn (a crash leaves
// the file as of some commit). Sync makes every commit that returned before
// it was called durable against both.
type Syncer interface {
	// DeferSync turns deferred sync on or off for every later commit on
	// this engine (and every handle sharing its file in this process).
	// It returns an error wrapping ErrNoDeferredSync when the engine
	// cannot defer.
	DeferSync(on bool) error
	// Sync is the durability barrier: when it returns nil, every commit
	// that returned before the call survives a power cut.
	Sync() error
}
