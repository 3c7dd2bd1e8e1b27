package sqlite

import (
	"fmt"
	"os"

	sqlite3 "github.com/ncruces/go-sqlite3"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Space and reclaim (kv.Reclaimer).
//
// Vaults are created with auto_vacuum=INCREMENTAL (template.db): SQLite
// then keeps the pointer map that lets PRAGMA incremental_vacuum move the
// last pages into free ones and cut the file, a bounded number of pages
// per call. A database made before has auto_vacuum=NONE, which SQLite only
// changes in a VACUUM: Rewrite runs one, and the file is incremental from
// then on. In WAL mode the cut reaches the file at the next checkpoint
// that copies the whole log, which Reclaim attempts right away.

const (
	sqlScanSizesFrom  = `SELECT k, length(v) FROM kv WHERE k >= ?1 ORDER BY k`
	sqlScanSizesRange = `SELECT k, length(v) FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k`
	sqlScanKeysFrom   = `SELECT k FROM kv WHERE k >= ?1 ORDER BY k`
	sqlScanKeysRange  = `SELECT k FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k`
)

var (
	_ kv.Reclaimer   = (*DB)(nil)
	_ kv.SizeScanner = (*tx)(nil)
	_ kv.KeyScanner  = (*tx)(nil)
)

// ScanSizes implements kv.SizeScanner. length() of a blob reads the
// record's header only, never its overflow pages.
func (t *tx) ScanSizes(start, end []byte, fn func(key []byte, size int) (bool, error)) (err error) {
	sql := sqlScanSizesFrom
	if end != nil {
		sql = sqlScanSizesRange
	}
	return t.scanWith(sql, start, end, func(s *sqlite3.Stmt) (bool, error) {
		return fn(s.ColumnRawBlob(0), s.ColumnInt(1))
	})
}

// ScanKeys implements kv.KeyScanner from the key index alone.
func (t *tx) ScanKeys(start, end []byte, fn func(key []byte) (bool, error)) (err error) {
	sql := sqlScanKeysFrom
	if end != nil {
		sql = sqlScanKeysRange
	}
	return t.scanWith(sql, start, end, func(s *sqlite3.Stmt) (bool, error) {
		return fn(s.ColumnRawBlob(0))
	})
}

// scanWith runs a range query of its own statement, calling row for each
// row.
func (t *tx) scanWith(sql string, start, end []byte, row func(*sqlite3.Stmt) (bool, error)) (err error) {
	if t.done {
		return errTxDone
	}
	s, _, err := t.c.c.Prepare(sql)
	if err != nil {
		return wrapErr(t.c.path, "scan sizes", err)
	}
	defer s.Close()
	t.scanning++
	defer func() { t.scanning-- }()
	if err := bindBytes(s, 1, start); err != nil {
		return wrapErr(t.c.path, "scan sizes", err)
	}
	if end != nil {
		if err := bindBytes(s, 2, end); err != nil {
			return wrapErr(t.c.path, "scan sizes", err)
		}
	}
	for s.Step() {
		more, err := row(s)
		if err != nil || !more {
			return err
		}
	}
	return wrapErr(t.c.path, "scan sizes", s.Err())
}

// pragmaInt runs a pragma that returns one integer.
func (c *conn) pragmaInt(name string) (int64, error) {
	s, _, err := c.c.Prepare(`PRAGMA ` + name)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var v int64
	if s.Step() {
		v = s.ColumnInt64(0)
	}
	return v, s.Reset()
}

// pages reads the page size, the free pages and the auto_vacuum mode.
func (c *conn) pages() (size, free, autoVacuum int64, err error) {
	if size, err = c.pragmaInt("page_size"); err == nil {
		if free, err = c.pragmaInt("freelist_count"); err == nil {
			autoVacuum, err = c.pragmaInt("auto_vacuum")
		}
	}
	return size, free, autoVacuum, err
}

// usedPages is the pages of the database, log included, that hold data.
func (c *conn) usedPages() (int64, error) {
	n, err := c.pragmaInt("page_count")
	if err != nil {
		return 0, err
	}
	free, err := c.pragmaInt("freelist_count")
	return n - free, err
}

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// fileBytes is what the database and its log take on disk.
func (db *DB) fileBytes() int64 {
	var n int64
	for _, p := range []string{db.path, db.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Space implements kv.Spacer.
func (db *DB) Space() (kv.Space, error) {
	if err := db.enter(); err != nil {
		return kv.Space{}, err
	}
	defer db.running.Done()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	size, free, av, err := db.w.pages()
	var used int64
	if err == nil {
		used, err = db.w.usedPages()
	}
	if err != nil {
		return kv.Space{}, wrapErr(db.path, "space", err)
	}
	return kv.Space{FileBytes: db.fileBytes(), FreeBytes: size * free, UsedBytes: size * used,
		Incremental: av == autoVacuumIncremental}, nil
}

// Reclaim implements kv.Reclaimer with PRAGMA incremental_vacuum: the
// file shrinks by the free pages it moves, at most limit bytes of them.
func (db *DB) Reclaim(limit int64) (int64, error) {
	if err := db.enter(); err != nil {
		return 0, err
	}
	defer db.running.Done()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	size, before, av, err := db.w.pages()
	if err != nil {
		return 0, wrapErr(db.path, "reclaim", err)
	}
	if av != autoVacuumIncremental || before == 0 {
		return 0, nil
	}
	n := int64(0) // all of them
	if limit > 0 {
		n = max(1, limit/size)
	}
	if err := db.w.exec(fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, n)); err != nil {
		return 0, wrapErr(db.path, "reclaim", err)
	}
	db.committed()
	_, after, _, err := db.w.pages()
	if err != nil {
		return 0, wrapErr(db.path, "reclaim", err)
	}
	if db.ckpt == nil {
		// With deferred sync the background checkpoint copies the log
		// once the writer rests; here, nothing would until the log is
		// long, and the file stays as large meanwhile.
		db.checkpointNow(sqlite3.CHECKPOINT_PASSIVE)
	}
	return (before - after) * size, nil
}

// checkpointNow copies the log into the database file, which also cuts
// the file to the database's size when the whole log is copied. Errors
// leave the log to the next checkpoint; db.wmu is held.
func (db *DB) checkpointNow(mode sqlite3.CheckpointMode) {
	if cp := db.ckpt; cp != nil {
		cp.mu.Lock()
		defer cp.mu.Unlock()
	}
	_, _, _ = db.w.c.WALCheckpoint("main", mode)
}

// Rewrite implements kv.Reclaimer with VACUUM, switching the database to
// auto_vacuum=INCREMENTAL on the way: the migration of vaults made before
// it was the default.
func (db *DB) Rewrite() error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if err := db.w.exec(`PRAGMA auto_vacuum = INCREMENTAL; VACUUM`); err != nil {
		return wrapErr(db.path, "rewrite", err)
	}
	db.committed()
	// The log now holds the whole database. TRUNCATE empties it, unless a
	// reader still needs it: then it waits for no one (busy timeout 0)
	// and the log is cut back to journal_size_limit once reused.
	if err := db.w.c.BusyTimeout(0); err == nil {
		db.checkpointNow(sqlite3.CHECKPOINT_TRUNCATE)
		_ = db.w.c.BusyTimeout(db.opts.BusyTimeout)
	}
	db.checkpointNow(sqlite3.CHECKPOINT_PASSIVE)
	return nil
}
