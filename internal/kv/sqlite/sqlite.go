// Package sqlite is the default kv engine: one SQLite database per vault,
// driven by github.com/ncruces/go-sqlite3 (SQLite translated to Go, so the
// build needs no cgo).
//
// The whole store is one table:
//
//	CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL)
//
// a rowid table whose key index holds the keys alone, in memcmp order
// as kv requires, so a Scan is one index walk (why not WITHOUT ROWID:
// build).
//
// The database runs in WAL mode with synchronous=FULL: a commit is on disk
// when Update returns, and readers in any process keep their snapshot while
// a writer commits. The SQLite header's application_id is set to "AVFS", so
// avfs can tell its own files from other SQLite databases.
//
// Concurrency: a DB keeps one dedicated write connection, used under a
// mutex, and a small pool of read connections. Writers in other processes
// are serialized by SQLite's file locks: Update starts with BEGIN IMMEDIATE
// and waits up to the busy timeout for the write lock, then fails with an
// error wrapping kv.ErrBusy. Nested Update calls on one DB deadlock.
package sqlite

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/internal/fsutil"
)

// Name is the engine's registered name.
const Name = "sqlite"

// Caps are the engine's capabilities: WAL mode lets other processes open
// the file beside this one.
var Caps = kv.Capabilities{SharedOpen: true, DataFiles: []string{"-wal"}, SideFiles: []string{"-shm", "-journal"}}

// Capabilities implements kv.Capable.
func (db *DB) Capabilities() kv.Capabilities { return Caps }

// ApplicationID is written to the SQLite header (offset 68) of every vault:
// "AVFS" in ASCII.
const ApplicationID = 0x41564653

// DefaultBusyTimeout is how long a writer waits for another process's write
// transaction before giving up with kv.ErrBusy.
const DefaultBusyTimeout = 5 * time.Second

// maxIdleReaders bounds the read connections kept open between Views. Each
// connection carries its own page cache, so more would cost memory for
// little gain on the machines avfs targets.
const maxIdleReaders = 4

// Page cache sizes, in SQLite's "negative means KiB" form. SQLite's
// default (2 MiB) makes a random 1,000-key write batch on a 100k-key vault
// twice as slow, as pages are re-read through the VFS; the writer, which
// sees every batch, gets the larger share.
const (
	writerCacheSize = -16384
	readerCacheSize = -8192
)

// Options tune an engine; the zero value (or nil) means the defaults.
type Options struct {
	// BusyTimeout bounds the wait for another process's write lock
	// (DefaultBusyTimeout when zero).
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous pragma, "FULL" when empty. Only
	// benchmarks set it: with NORMAL a commit may be lost on power failure.
	Synchronous string
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.BusyTimeout <= 0 {
		r.BusyTimeout = DefaultBusyTimeout
	}
	if r.Synchronous == "" {
		r.Synchronous = "FULL"
	}
	return r
}

// DB is a SQLite-backed kv.Engine. It is safe for concurrent use.
type DB struct {
	path string
	opts Options

	wmu  sync.Mutex // held for the whole of an Update
	w    *conn
	ckpt *checkpointer // while commits are deferred (checkpoint.go)

	mu     sync.Mutex // guards the fields below
	closed bool
	idle   []*conn // read connections ready for a View
	// walNamed is the log file whose directory entry Sync made durable.
	walNamed [2]uint64
	running  sync.WaitGroup // Views and Updates in progress
}

var _ kv.Engine = (*DB)(nil)

// Create makes a new, empty vault database at path (mode 0600). It fails
// with an error wrapping os.ErrExist when path exists.
//
// The new file is a copy of an embedded empty vault database (template.db,
// kept current by TestTemplate): one write and one fsync instead of the
// three journaled transactions that building the schema takes, which is
// most of what a fork costs.
func Create(path string, opts *Options) (*DB, error) {
	path, err := fsutil.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := fsutil.WriteNew(path, templateDB); err != nil {
		return nil, err
	}
	db, err := open(path, opts.withDefaults())
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return db, nil
}

//go:embed template.db
var templateDB []byte

// build makes an empty vault database the slow way: the schema and the
// application_id written in rollback-journal mode, straight into the main
// file, so that the header identifies the file before any WAL exists; then
// WAL is switched on (it persists). TestTemplate regenerates template.db
// with it.
func build(path string) error {
	if err := fsutil.CreateNew(path); err != nil {
		return err
	}
	c, err := openConn(path, (*Options)(nil).withDefaults())
	if err != nil {
		return err
	}
	// A rowid table, not WITHOUT ROWID: the key index then holds keys
	// only. With values in the key's b-tree, every binary search that
	// passed a 64 KiB chunk read all of it (SQLite reads a whole record
	// that overflows its page to compare keys): in a vault holding 128 MiB
	// a lookup cost 430 µs instead of 20, a read of the data 6.8x more.
	// 16 KiB pages: a 64 KiB chunk then spans 4 overflow pages, not 17.
	// Measured against 4 KiB pages (vfs, 64 MiB file): reads 2.2x faster,
	// writes 10% faster, small commits no slower, a stat 10% slower; 64 KiB
	// pages read faster still but made every small lookup copy a 64 KiB page.
	// auto_vacuum=INCREMENTAL lets freed pages go back to the host a few
	// at a time (space.go); SQLite takes it only before the first table.
	err = c.exec(fmt.Sprintf(`PRAGMA page_size = 16384;
		PRAGMA auto_vacuum = INCREMENTAL;
		BEGIN IMMEDIATE;
		PRAGMA application_id = %d;
		CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL);
		COMMIT;`, ApplicationID))
	if err == nil {
		err = c.setWAL()
	}
	if cerr := c.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wrapErr(path, "create", err)
	}
	return nil
}

// Open opens an existing vault database. A file that is not a SQLite
// database, or a SQLite database that is not a vault, gives an error
// wrapping kv.ErrForeign; a damaged one kv.ErrCorrupt.
func Open(path string, opts *Options) (*DB, error) {
	path, err := fsutil.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	err = Detect(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	return open(path, opts.withDefaults())
}

func open(path string, opts Options) (*DB, error) {
	w, err := openConn(path, opts)
	if err != nil {
		return nil, wrapErr(path, "open", err)
	}
	err = w.checkVault()
	if err == nil {
		err = w.exec(fmt.Sprintf(`PRAGMA cache_size = %d`, writerCacheSize))
	}
	if err == nil {
		err = w.setWAL() // in case another tool switched it off
	}
	if err == nil {
		err = w.prepare()
	}
	if err != nil {
		w.close()
		return nil, wrapErr(path, "open", err)
	}
	fixSidecarModes(path)
	return &DB{path: path, opts: opts, w: w}, nil
}

// fixSidecarModes gives the -wal and -shm files the vault's own mode: the
// driver creates them 0666&^umask, and the WAL holds vault data. The -wal
// is also created with modeof=, this catches the -shm and older files.
func fixSidecarModes(path string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	mode := fi.Mode().Perm()
	for _, suffix := range []string{"-wal", "-shm"} {
		if si, err := os.Stat(path + suffix); err == nil && si.Mode().Perm()&^mode != 0 {
			_ = os.Chmod(path+suffix, mode)
		}
	}
}

// Name implements kv.Engine.
func (db *DB) Name() string { return Name }

// Path implements kv.Engine.
func (db *DB) Path() string { return db.path }

// enter registers a transaction so that Close waits for it.
func (db *DB) enter() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return kv.ErrClosed
	}
	db.running.Add(1)
	return nil
}

// Close waits for running transactions, then closes every connection.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return kv.ErrClosed
	}
	db.closed = true
	db.mu.Unlock()
	db.running.Wait()

	db.wmu.Lock()
	err := db.stopCheckpointer()
	db.wmu.Unlock()
	err = errors.Join(err, db.w.close())
	for _, c := range db.idle {
		err = errors.Join(err, c.close())
	}
	db.idle = nil
	if err != nil {
		return wrapErr(db.path, "close", err)
	}
	return nil
}

// reader takes an idle read connection or opens a new one.
func (db *DB) reader() (*conn, error) {
	db.mu.Lock()
	if n := len(db.idle); n > 0 {
		c := db.idle[n-1]
		db.idle = db.idle[:n-1]
		db.mu.Unlock()
		return c, nil
	}
	db.mu.Unlock()
	c, err := openConn(db.path, db.opts)
	if err == nil {
		err = c.exec(fmt.Sprintf(`PRAGMA query_only = ON; PRAGMA cache_size = %d`, readerCacheSize))
	}
	if err == nil {
		err = c.prepare()
	}
	if err != nil {
		if c != nil {
			c.close()
		}
		return nil, err
	}
	return c, nil
}

// release returns a read connection to the pool. A connection that could
// not be brought back out of its transaction is closed instead of reused.
func (db *DB) release(c *conn, ok bool) {
	db.mu.Lock()
	if ok && !db.closed && len(db.idle) < maxIdleReaders {
		db.idle = append(db.idle, c)
		c = nil
	}
	db.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// View implements kv.Engine. The snapshot is taken when View starts.
func (db *DB) View(fn func(kv.Tx) error) (err error) {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()

	c, err := db.reader()
	if err != nil {
		return wrapErr(db.path, "view", err)
	}
	if err := c.beginRead(); err != nil {
		db.release(c, c.rollback() == nil)
		return wrapErr(db.path, "view", err)
	}
	t := &tx{c: c}
	defer func() {
		// Runs on return and on panic: a read transaction has nothing to
		// keep, so it always ends in ROLLBACK.
		t.done = true
		db.release(c, c.rollback() == nil)
	}()
	return fn(t)
}

// Update implements kv.Engine.
func (db *DB) Update(fn func(kv.Tx) error) (err error) {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	db.wmu.Lock()
	defer db.wmu.Unlock()

	c := db.w
	if err := c.exec1(c.beginImm); err != nil {
		_ = c.rollback()
		return wrapErr(db.path, "begin write", err)
	}
	t := &tx{c: c, write: true}
	committed := false
	defer func() {
		t.done = true
		if !committed {
			// fn failed or panicked, or COMMIT failed: undo, so the
			// connection is out of its transaction for the next Update.
			_ = c.rollback()
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	t.done = true
	if err := c.exec1(c.commit); err != nil {
		return wrapErr(db.path, "commit", err)
	}
	committed = true
	db.committed()
	return nil
}
