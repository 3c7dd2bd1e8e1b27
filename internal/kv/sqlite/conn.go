package sqlite

import (
	"errors"
	"fmt"
	"slices"

	sqlite3 "github.com/ncruces/go-sqlite3"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// The statements every connection prepares once: each Tx call would
// otherwise pay for parsing and planning, which costs more than the lookup.
const (
	sqlGet       = `SELECT v FROM kv WHERE k = ?1`
	sqlHas       = `SELECT 1 FROM kv WHERE k = ?1` // the key's index alone: no value read
	sqlPut       = `INSERT INTO kv(k, v) VALUES(?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v`
	sqlDelete    = `DELETE FROM kv WHERE k = ?1`
	sqlScanFrom  = `SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k`
	sqlScanRange = `SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k`
	// Reading any page starts the read transaction: run right after BEGIN,
	// it pins the snapshot to the moment View was called.
	sqlSnapshot = `PRAGMA schema_version`
)

var (
	errWriteInScan = errors.New("kv/sqlite: Put or Delete during Scan")
	errTxDone      = fmt.Errorf("kv/sqlite: transaction already ended: %w", kv.ErrClosed)
	// emptyValue stands in for the nil SQLite returns for a zero-length
	// blob, so an empty value never looks like a missing one.
	emptyValue = []byte{}
)

// conn is one SQLite connection with its cached statements. It is used by
// one transaction at a time.
type conn struct {
	path string
	c    *sqlite3.Conn

	get, has, put, del    *sqlite3.Stmt
	scanFrom, scanRange   *sqlite3.Stmt
	begin, beginImm       *sqlite3.Stmt
	commit, rollbackStmt  *sqlite3.Stmt
	snapshot              *sqlite3.Stmt
	savepoint, release    *sqlite3.Stmt // a batch's steps (batch.go)
	rollbackTo            *sqlite3.Stmt
	scanFromBusy, rngBusy bool // a Scan is iterating the cached statement
}

// uri builds the file: URI for path. modeof makes the driver give the -wal
// file the vault's permissions instead of 0666&^umask. SQLite decodes %XX
// escapes only, so everything but unreserved characters is escaped.
func uri(path string) string {
	esc := func(s string) string {
		var b []byte
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '/' || c == '-' || c == '.' || c == '_' || c == '~' ||
				'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				b = append(b, c)
			} else {
				b = fmt.Appendf(b, "%%%02X", c)
			}
		}
		return string(b)
	}
	return "file:" + esc(path) + "?modeof=" + esc(path)
}

// openConn opens a connection to an existing file; SQLite never creates
// the main file (Create does that, exclusively). temp_store=MEMORY keeps
// the journal of a batch's savepoints (kv.Batch) in memory: in a temporary
// file every page a step changed cost a write system call.
func openConn(path string, opts Options) (*conn, error) {
	c, err := sqlite3.OpenFlags(uri(path), sqlite3.OPEN_READWRITE|sqlite3.OPEN_URI)
	if err != nil {
		return nil, err
	}
	cn := &conn{path: path, c: c}
	err = c.BusyTimeout(opts.BusyTimeout)
	if err == nil {
		err = cn.exec(`PRAGMA synchronous = ` + opts.Synchronous + `;
			PRAGMA journal_size_limit = 67108864;
			PRAGMA trusted_schema = OFF;
			PRAGMA temp_store = MEMORY;`)
	}
	if err != nil {
		cn.close()
		return nil, err
	}
	return cn, nil
}

func (c *conn) exec(sql string) error { return c.c.Exec(sql) }

func (c *conn) exec1(s *sqlite3.Stmt) error { return s.Exec() }

// checkVault reads the header: the first read of the file, so this is
// where a non-database fails (NOTADB), and where a SQLite database that is
// not a vault is told apart.
func (c *conn) checkVault() error {
	s, _, err := c.c.Prepare(`PRAGMA application_id`)
	if err != nil {
		return err
	}
	defer s.Close()
	if !s.Step() {
		return s.Reset()
	}
	if id := s.ColumnInt64(0); id != ApplicationID {
		return fmt.Errorf("%w: SQLite database with application_id %#x, not an avfs vault", kv.ErrForeign, id)
	}
	return s.Reset()
}

func (c *conn) setWAL() error {
	s, _, err := c.c.Prepare(`PRAGMA journal_mode = WAL`)
	if err != nil {
		return err
	}
	defer s.Close()
	mode := ""
	if s.Step() {
		mode = s.ColumnText(0)
	}
	if err := s.Reset(); err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("cannot switch to WAL mode (journal_mode is %q)", mode)
	}
	return nil
}

func (c *conn) prepare() error {
	for _, p := range []struct {
		s   **sqlite3.Stmt
		sql string
	}{
		{&c.get, sqlGet}, {&c.has, sqlHas}, {&c.put, sqlPut}, {&c.del, sqlDelete},
		{&c.scanFrom, sqlScanFrom}, {&c.scanRange, sqlScanRange},
		{&c.begin, `BEGIN`}, {&c.beginImm, `BEGIN IMMEDIATE`},
		{&c.commit, `COMMIT`}, {&c.rollbackStmt, `ROLLBACK`},
		{&c.snapshot, sqlSnapshot},
		{&c.savepoint, `SAVEPOINT step`}, {&c.release, `RELEASE step`},
		{&c.rollbackTo, `ROLLBACK TO step`},
	} {
		s, _, err := c.c.PrepareFlags(p.sql, sqlite3.PREPARE_PERSISTENT)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.s = s
	}
	return nil
}

func (c *conn) beginRead() error {
	if err := c.begin.Exec(); err != nil {
		return err
	}
	return c.snapshot.Exec()
}

// rollback ends the connection's transaction, if it still has one.
func (c *conn) rollback() error {
	if c.c.GetAutocommit() {
		return nil
	}
	return c.rollbackStmt.Exec()
}

func (c *conn) close() error {
	for _, s := range slices.Collect(c.c.Stmts()) {
		s.Close()
	}
	return c.c.Close()
}

// bindBytes binds b as a blob. The driver binds a nil slice as NULL, which
// compares unequal to everything; kv treats nil and empty alike.
func bindBytes(s *sqlite3.Stmt, param int, b []byte) error {
	if len(b) == 0 {
		return s.BindZeroBlob(param, 0)
	}
	return s.BindBlob(param, b)
}

// tx implements kv.Tx on one connection.
type tx struct {
	c        *conn
	write    bool
	done     bool // set when View/Update returns: the conn may serve others
	scanning int
}

func (t *tx) checkWrite() error {
	switch {
	case t.done:
		return errTxDone
	case !t.write:
		return kv.ErrReadOnly
	case t.scanning > 0:
		return errWriteInScan
	}
	return nil
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, errTxDone
	}
	s := t.c.get
	if err := bindBytes(s, 1, key); err != nil {
		return nil, wrapErr(t.c.path, "get", err)
	}
	if !s.Step() {
		if err := s.Reset(); err != nil {
			return nil, wrapErr(t.c.path, "get", err)
		}
		return nil, kv.ErrNotFound
	}
	// The driver's slice points into SQLite's memory and dies with the next
	// step; kv promises the value until the transaction ends.
	raw := s.ColumnRawBlob(0)
	v := make([]byte, len(raw))
	copy(v, raw)
	if err := s.Reset(); err != nil {
		return nil, wrapErr(t.c.path, "get", err)
	}
	return v, nil
}

var _ kv.Haser = (*tx)(nil)

// Has implements kv.Haser.
func (t *tx) Has(key []byte) (bool, error) {
	if t.done {
		return false, errTxDone
	}
	s := t.c.has
	if err := bindBytes(s, 1, key); err != nil {
		return false, wrapErr(t.c.path, "has", err)
	}
	found := s.Step()
	if err := s.Reset(); err != nil {
		return false, wrapErr(t.c.path, "has", err)
	}
	return found, nil
}

func (t *tx) Put(key, value []byte) error {
	if err := t.checkWrite(); err != nil {
		return err
	}
	if len(key) == 0 {
		return kv.ErrEmptyKey
	}
	s := t.c.put
	err := bindBytes(s, 1, key)
	if err == nil {
		err = bindBytes(s, 2, value)
	}
	if err == nil {
		err = s.Exec()
	}
	return wrapErr(t.c.path, "put", err)
}

func (t *tx) Delete(key []byte) error {
	if err := t.checkWrite(); err != nil {
		return err
	}
	s := t.c.del
	err := bindBytes(s, 1, key)
	if err == nil {
		err = s.Exec()
	}
	return wrapErr(t.c.path, "delete", err)
}

func (t *tx) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) (err error) {
	if t.done {
		return errTxDone
	}
	s, busy, sql := t.c.scanFrom, &t.c.scanFromBusy, sqlScanFrom
	if end != nil {
		s, busy, sql = t.c.scanRange, &t.c.rngBusy, sqlScanRange
	}
	if *busy {
		// A Scan inside another Scan's fn: the cached statement is
		// mid-iteration, so this one gets its own.
		if s, _, err = t.c.c.Prepare(sql); err != nil {
			return wrapErr(t.c.path, "scan", err)
		}
		defer s.Close()
	} else {
		*busy = true
		defer func() { *busy = false }()
	}
	t.scanning++
	// Deferred so that a panic in fn leaves no statement mid-step (which
	// would keep the read transaction alive on this connection).
	defer func() {
		t.scanning--
		if rerr := s.Reset(); err == nil && rerr != nil {
			err = wrapErr(t.c.path, "scan", rerr)
		}
	}()

	if err := bindBytes(s, 1, start); err != nil {
		return wrapErr(t.c.path, "scan", err)
	}
	if end != nil {
		if err := bindBytes(s, 2, end); err != nil {
			return wrapErr(t.c.path, "scan", err)
		}
	}
	for s.Step() {
		k, v := s.ColumnRawBlob(0), s.ColumnRawBlob(1)
		if v == nil {
			v = emptyValue
		}
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return wrapErr(t.c.path, "scan", s.Err())
}

// wrapErr adds the path and operation to a driver error, and the kv
// sentinel a caller can act on: BUSY/LOCKED (after the busy timeout) is
// kv.ErrBusy, NOTADB kv.ErrForeign, CORRUPT kv.ErrCorrupt.
func wrapErr(path, op string, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	switch {
	case errors.Is(err, sqlite3.BUSY), errors.Is(err, sqlite3.LOCKED):
		kind = kv.ErrBusy
	case errors.Is(err, sqlite3.NOTADB):
		kind = kv.ErrForeign
	case errors.Is(err, sqlite3.CORRUPT):
		kind = kv.ErrCorrupt
	}
	if kind != nil && !errors.Is(err, kind) {
		return fmt.Errorf("sqlite %s: %s: %w: %w", path, op, kind, err)
	}
	return fmt.Errorf("sqlite %s: %s: %w", path, op, err)
}
