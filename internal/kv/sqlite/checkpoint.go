package sqlite

import (
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/ncruces/go-sqlite3"
)

// Checkpoints while commits are deferred (kv.Syncer, the FUSE mount).
//
// SQLite copies the log into the database file (a checkpoint) in the
// writer that commits past 1,000 pages of log (wal_autocheckpoint): that
// commit, and the fsync waiting for it, then also writes up to 16 MiB
// into the database file and syncs it, tens of milliseconds. With
// deferred sync on, a goroutine checkpoints once the writer has rested
// for checkpointIdle, so that the commits of the next burst find the log
// copied and rewrite it from its start, in place.
//
// The checkpoint in the committing writer stays: it bounds the log under
// a writer that never rests. It is made here rather than by SQLite, so
// that it waits for a background checkpoint in progress instead of
// giving up (SQLite's automatic checkpoint does not wait, and the log
// would then grow until a later commit). A checkpoint that starts as soon
// as the log passes a size, rather than when the writer rests, was
// measured worse: the fsyncs that follow a large commit then wait behind
// its writes, and append to the log instead of rewriting it (an fsync
// right after persisting a 50 MiB file took 17–53 ms instead of 5–8 ms).
//
// PASSIVE checkpoints never wait for a lock and never make a writer or a
// reader wait; SQLite syncs the log before it copies it and the database
// file before the log is reused, whichever connection checkpoints.

// autoCheckpointFrames is SQLite's default wal_autocheckpoint.
const autoCheckpointFrames = 1000

// checkpointIdle is how long the writer rests before the background
// checkpoint, and checkpointFrames how much of the log must be waiting
// for it: half of what makes the writer checkpoint. Smaller logs are left
// to grow, as every checkpoint costs the commit after it one more sync,
// of the header of the log it starts again. Variables for tests.
var (
	checkpointIdle   = 200 * time.Millisecond
	checkpointFrames = autoCheckpointFrames / 2
)

// checkpointer is the background checkpoint of one DB.
type checkpointer struct {
	mu     sync.Mutex    // held across a checkpoint, by either side
	frames atomic.Int64  // frames in the log after the last commit
	last   atomic.Int64  // unix nanoseconds of the last commit
	kick   chan struct{} // a commit happened
	stop   chan struct{}
	done   chan struct{}
}

// startCheckpointer starts the background checkpoint and takes the
// writer's over from SQLite; db.wmu is held.
func (db *DB) startCheckpointer() {
	if db.ckpt != nil {
		return
	}
	cp := &checkpointer{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	db.ckpt = cp
	// A WAL hook replaces SQLite's automatic checkpoint.
	db.w.c.WALHook(func(_ *sqlite3.Conn, _ string, frames int) error {
		cp.frames.Store(int64(frames))
		return nil
	})
	go cp.run(db)
}

// stopCheckpointer stops it, waiting for a checkpoint in progress, and
// gives the writer's back to SQLite; db.wmu is held.
func (db *DB) stopCheckpointer() error {
	cp := db.ckpt
	if cp == nil {
		return nil
	}
	db.ckpt = nil
	close(cp.stop)
	<-cp.done
	db.w.c.WALHook(nil)
	return db.w.c.WALAutoCheckpoint(autoCheckpointFrames)
}

// committed follows every commit of the writer; db.wmu is held. Past
// autoCheckpointFrames it checkpoints, as SQLite's automatic checkpoint
// would, after a background one in progress.
func (db *DB) committed() {
	cp := db.ckpt
	if cp == nil {
		return
	}
	cp.last.Store(time.Now().UnixNano())
	if cp.frames.Load() >= autoCheckpointFrames {
		cp.mu.Lock()
		// Errors leave the log to the next commit, as SQLite's would.
		_, _, _ = db.w.c.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
		cp.mu.Unlock()
		return
	}
	select {
	case cp.kick <- struct{}{}:
	default:
	}
}

func (cp *checkpointer) run(db *DB) {
	defer close(cp.done)
	var c *conn // its own connection: the writer's is busy with commits
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	idle := time.NewTimer(checkpointIdle)
	idle.Stop()
	for {
		select {
		case <-cp.stop:
			return
		case <-cp.kick:
			idle.Reset(checkpointIdle)
			continue
		case <-idle.C:
		}
		if rest := checkpointIdle - time.Since(time.Unix(0, cp.last.Load())); rest > 0 {
			idle.Reset(rest) // a commit came in meanwhile
			continue
		}
		if c == nil {
			var err error
			if c, err = openConn(db.path, db.opts); err != nil {
				c = nil
				continue // the writer's checkpoint still bounds the log
			}
		}
		cp.mu.Lock()
		// NOOP only reads how much of the log is not yet copied. Errors
		// leave the log to the next checkpoint.
		nLog, nCkpt, err := c.c.WALCheckpoint("main", sqlite3.CHECKPOINT_NOOP)
		if err == nil && nLog-nCkpt >= checkpointFrames {
			_, _, _ = c.c.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
		}
		cp.mu.Unlock()
	}
}
