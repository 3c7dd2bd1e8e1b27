package sqlite

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentvfs/agentvfs/internal/kv"
)

var _ kv.Syncer = (*DB)(nil)

// DeferSync implements kv.Syncer by switching the write connection between
// synchronous=FULL (each commit fsyncs the WAL) and synchronous=NORMAL
// (commits only write the WAL; checkpoints still fsync it first, then the
// database file, so the file always recovers to some commit).
func (db *DB) DeferSync(on bool) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	mode := db.opts.Synchronous
	if on {
		mode = "NORMAL"
	}
	if err := db.w.exec(`PRAGMA synchronous = ` + mode); err != nil {
		return wrapErr(db.path, "defer sync", err)
	}
	return nil
}

// Sync implements kv.Syncer: it fsyncs the write-ahead log, which holds
// every commit not yet checkpointed into the database file (a checkpoint
// fsyncs the database file before the log is reused), and the directory,
// which names the log. Commits made with synchronous=FULL are already
// synced; then this costs an fsync of clean files.
func (db *DB) Sync() error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	for _, p := range []string{db.path + "-wal", filepath.Dir(db.path)} {
		f, err := os.Open(p)
		if os.IsNotExist(err) {
			continue // no log: everything is in the (synced) database file
		}
		if err != nil {
			return fmt.Errorf("sqlite %s: sync: %w", db.path, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("sqlite %s: sync: %w", db.path, err)
		}
	}
	return nil
}
