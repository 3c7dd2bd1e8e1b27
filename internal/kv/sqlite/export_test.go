package sqlite

import (
	"os"
	"time"
)

// OnSync makes Sync call fn with each file before it syncs it, until
// the returned function restores the default.
func OnSync(fn func(f *os.File)) (restore func()) {
	old := syncFile
	syncFile = func(f *os.File) error {
		fn(f)
		return old(f)
	}
	return func() { syncFile = old }
}

// SetCheckpointIdle sets how long the writer rests before the background
// checkpoint and how many log frames it waits for, until the returned
// function restores the defaults.
func SetCheckpointIdle(d time.Duration, frames int) (restore func()) {
	oldD, oldF := checkpointIdle, checkpointFrames
	checkpointIdle, checkpointFrames = d, frames
	return func() { checkpointIdle, checkpointFrames = oldD, oldF }
}

// Checkpointing reports whether the background checkpoint runs.
func (db *DB) Checkpointing() bool {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	return db.ckpt != nil
}
