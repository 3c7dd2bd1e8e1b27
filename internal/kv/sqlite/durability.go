package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/kv"
)

var _ kv.Syncer = (*DB)(nil)

// DeferSync implements kv.Syncer by switching the write connection between
// synchronous=FULL (each commit fsyncs the WAL) and synchronous=NORMAL
// (commits only write the WAL; checkpoints still fsync it first, then the
// database file, so the file always recovers to some commit). While it is
// on, the WAL is checkpointed in the background once the writer rests, and
// by the writer past SQLite's automatic checkpoint (checkpoint.go).
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
	if on {
		db.startCheckpointer()
		return nil
	}
	return wrapErr(db.path, "defer sync", db.stopCheckpointer())
}

// Sync implements kv.Syncer: it syncs the write-ahead log, which holds
// every commit not yet checkpointed into the database file (a checkpoint
// fsyncs the database file before the log is reused), and the directory,
// which names the log — once per log file: the log lives as long as a
// connection is open, so after the first Sync its name is durable. Commits
// made with synchronous=FULL are already synced; then this costs an fsync
// of clean files.
func (db *DB) Sync() error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	f, err := os.Open(db.path + "-wal")
	if os.IsNotExist(err) {
		return nil // no log: everything is in the (synced) database file
	}
	if err != nil {
		return fmt.Errorf("sqlite %s: sync: %w", db.path, err)
	}
	defer f.Close()
	if err := syncFile(f); err != nil {
		return fmt.Errorf("sqlite %s: sync: %w", db.path, err)
	}
	id, ok := fileID(f)
	db.mu.Lock()
	named := ok && id == db.walNamed
	db.mu.Unlock()
	if named {
		return nil
	}
	d, err := os.Open(filepath.Dir(db.path))
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		return fmt.Errorf("sqlite %s: sync: %w", db.path, err)
	}
	if ok {
		db.mu.Lock()
		db.walNamed = id
		db.mu.Unlock()
	}
	return nil
}

// syncFile is datasync; tests watch it.
var syncFile = datasync

// fileID is the device and inode of an open file.
func fileID(f *os.File) ([2]uint64, bool) {
	fi, err := f.Stat()
	if err != nil {
		return [2]uint64{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]uint64{}, false
	}
	return [2]uint64{uint64(st.Dev), uint64(st.Ino)}, true
}
