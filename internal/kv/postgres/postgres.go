// Package postgres is the kv engine on PostgreSQL, through
// github.com/jackc/pgx/v5: a store that many hosts share.
//
// A database holds many avfs stores (Options.Table names one), all in
// the same four tables (format 2, schema.go):
//
//	avfs_meta(key text PRIMARY KEY, value text NOT NULL)
//	  -- ('application', 'avfs'), ('format', '2')
//	avfs_stores(name text PRIMARY KEY, id bigint UNIQUE, created timestamptz)
//	avfs_pairs(store bigint, k bytea, v bytea NOT NULL, PRIMARY KEY (store, k))
//	avfs_leases(store text PRIMARY KEY, host, pid, token, expires)
//
// A store is a row of avfs_stores and its pairs are the rows of
// avfs_pairs under its id: making one is an INSERT (no DDL, no catalog
// lock), and dropping one deletes its rows. A lease (lease.go) names the
// one writer of a store across hosts. A format-1 database (a table per
// store) is migrated in one transaction when first opened (migrate.go).
//
// bytea compares as memcmp, shorter first on a tie, which is kv's order,
// whatever the database's collation. A Scan is a walk of the primary
// key within the store's id, fetched in pages of growing size, so a scan
// that stops early reads little and fn may call Get (or Scan) on the
// same transaction.
//
// Views are REPEATABLE READ READ ONLY transactions, their snapshot taken
// when View begins. Updates first take a session advisory lock of their
// store (the one of the shared store, for the stores sharing one), so
// the writers of a store queue (as SQLite's do) and run one at a time,
// each in a REPEATABLE READ transaction whose snapshot is taken once it
// holds the lock: each sees every write before it, and their schedule
// is serial. Writes are serializable so, without SSI's predicate locks:
// on the one table every store shares, those would fail writers of
// different stores against each other (an index page holds neighbouring
// stores' keys, and a long scan's locks widen to the whole relation),
// and a batch cannot be run again. A serialization failure or deadlock
// still possible is retried, up to Options.Retries times. A wait for the
// lock longer than Options.LockTimeout is kv.ErrBusy. Puts and Deletes are
// sent in pipelined batches before the next read and at commit: a write
// transaction costs round trips for its reads, not for each write.
//
// Every transaction runs under Options.Timeout. An unreachable server or
// refused credentials are kv.ErrUnavailable, with the DSN's password
// never in the message.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Name is the engine's registered name.
const Name = "postgres"

// Caps: any number of processes on any number of hosts may open a store.
var Caps = kv.Capabilities{SharedOpen: true}

// Defaults of Options.
const (
	DefaultTable       = "avfs_kv"
	DefaultRetries     = 50
	DefaultTimeout     = 5 * time.Minute
	DefaultLockTimeout = 5 * time.Second
	DefaultConnTimeout = 10 * time.Second
)

// Options tune an engine. The zero value is the defaults.
type Options struct {
	// Table names the store in the database (a table of its own in
	// format 1, whence the name): lower-case letters, digits and _,
	// starting with a letter, at most 63 bytes.
	Table string
	// Retries bounds the retries of an Update that failed to serialize.
	Retries int
	// Timeout bounds each transaction, from begin to commit.
	Timeout time.Duration
	// LockTimeout bounds the wait for another writer (then kv.ErrBusy).
	LockTimeout time.Duration
	// ConnTimeout bounds connecting to the server.
	ConnTimeout time.Duration
	// MaxConns sizes the connection pool (pgxpool's default when zero).
	MaxConns int32
	// Shared, when set, keeps a range of keys in a store every store of
	// the database naming it shares (shared.go).
	Shared *Shared
	// Unique tells Create that no other creator can choose Table (a
	// random name): the store's row is then written with the engine's
	// first commit instead of a commit of its own (newstore.go).
	Unique bool
}

var tableRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Table == "" {
		r.Table = DefaultTable
	}
	if !tableRE.MatchString(r.Table) || r.Table == metaTable {
		return r, fmt.Errorf("kv/postgres: table name %q is not lower-case letters, digits and _", r.Table)
	}
	if r.Retries <= 0 {
		r.Retries = DefaultRetries
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.LockTimeout <= 0 {
		r.LockTimeout = DefaultLockTimeout
	}
	if r.ConnTimeout <= 0 {
		r.ConnTimeout = DefaultConnTimeout
	}
	return r, nil
}

// DB is a PostgreSQL-backed kv.Engine. It is safe for concurrent use.
type DB struct {
	pool    *pgxpool.Pool
	poolKey string // of parked pools (pools.go)
	opts    Options
	where   string  // the DSN without its password, for messages and Path
	secret  string  // the password, scrubbed from every message
	lockID  int64   // the advisory lock of the store's writers
	id      int64   // the store's rows in avfs_pairs
	shared  *shared // nil unless Options.Shared

	unwritten atomic.Bool // the store's row awaits the first commit (newstore.go)

	mu      sync.Mutex
	closed  bool
	leases  map[*Lease]bool // held, released by Close
	running sync.WaitGroup

	retries atomic.Int64
}

var _ kv.Engine = (*DB)(nil)

// Create makes a new store in the database dsn names, and the database's
// avfs tables when it has none yet. With Options.Unique the store is
// written by the engine's first commit or its Close, and other engines
// open it from then on. It fails with an error wrapping
// os.ErrExist when the store exists, kv.ErrForeign when the
// database holds another program's tables and no avfs metadata, and
// kv.ErrNewerFormat when the metadata is a newer avfs's.
func Create(dsn string, opts *Options) (*DB, error) {
	return open(dsn, opts, openCreate)
}

// Open opens an existing store. It fails with an error wrapping
// os.ErrNotExist when the database has no avfs store or not that one,
// kv.ErrForeign when it is another program's, kv.ErrNewerFormat when a
// newer avfs wrote it and kv.ErrCorrupt when its tables are not avfs's
// shape; kv.ErrUnavailable when the server cannot be reached.
func Open(dsn string, opts *Options) (*DB, error) {
	return open(dsn, opts, openStore)
}

// How open prepares the engine: find the store, add it, or neither (an
// engine for List, whose store may not exist).
type openMode int

const (
	openStore openMode = iota
	openCreate
	openNone
)

func open(dsn string, o *Options, mode openMode) (*DB, error) {
	opts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx quotes the DSN in its parse errors: say only what is wrong.
		return nil, fmt.Errorf("kv/postgres: %w: the DSN does not parse (want postgres://user@host/db or key=value pairs)", kv.ErrUnavailable)
	}
	db := &DB{opts: opts, where: redact(cfg.ConnConfig), secret: cfg.ConnConfig.Password}
	cfg.ConnConfig.ConnectTimeout = opts.ConnTimeout
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if db.shared, err = newShared(opts.Shared); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	if db.shared != nil {
		// The writers of every store sharing the range queue on one
		// lock: two of them storing the same new key at once would
		// otherwise fail each other's transactions, and a
		// batch (a mount's) cannot be run again.
		h.Write([]byte("avfs:shared:" + db.shared.table))
	} else {
		h.Write([]byte("avfs:" + opts.Table))
	}
	db.lockID = int64(h.Sum64())
	ctx, cancel := context.WithTimeout(context.Background(), opts.ConnTimeout+opts.LockTimeout)
	defer cancel()
	db.poolKey = poolKey(dsn, opts)
	db.pool, err = takePool(ctx, db.poolKey, cfg)
	if err != nil {
		return nil, db.wrap("connect", err)
	}
	if mode == openNone {
		return db, nil
	}
	if err := db.prepare(ctx, mode == openCreate, dsn); err != nil {
		db.pool.Close() // maybe the server's fault: not for the next engine
		return nil, err
	}
	return db, nil
}

// Redact is dsn as avfs names it in messages and output: its user, host,
// port and database, never its password. A DSN that does not parse is
// named by its scheme alone.
func Redact(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "postgres://(a DSN that does not parse)"
	}
	return redact(cfg)
}

// redact is the DSN's host, port, user and database: never its password.
func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Name implements kv.Engine.
func (db *DB) Name() string { return Name }

// Path is the store's address without its password, and its name.
func (db *DB) Path() string { return db.where + "#" + db.opts.Table }

// Capabilities implements kv.Capable.
func (db *DB) Capabilities() kv.Capabilities {
	c := Caps
	if db.shared != nil {
		c.SharedPrefix = db.shared.prefix
	}
	return c
}

// Retries is how many Updates this engine has retried after a
// serialization failure or deadlock.
func (db *DB) Retries() int64 { return db.retries.Load() }

// Close waits for running transactions and gives the pool back, for the
// next engine on the address (pools.go).
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return kv.ErrClosed
	}
	db.closed = true
	held := make([]*Lease, 0, len(db.leases))
	for l := range db.leases {
		held = append(held, l)
	}
	db.mu.Unlock()
	// A lease must not outlive its engine: its heartbeat would renew it
	// through the parked pool for as long as the process lives.
	for _, l := range held {
		_ = l.Release()
	}
	db.running.Wait()
	err := db.writeStore()
	parkPool(db.poolKey, db.pool)
	return err
}

func (db *DB) enter() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return kv.ErrClosed
	}
	db.running.Add(1)
	return nil
}

// View implements kv.Engine.
func (db *DB) View(fn func(kv.Tx) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.Timeout)
	defer cancel()
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return db.wrap("connect", err)
	}
	defer c.Release()
	// The SELECT takes the snapshot now, in the same round trip: PostgreSQL
	// would take it at the first read.
	if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1"); err != nil {
		return db.wrap("begin", err)
	}
	t := &tx{db: db, ctx: ctx, c: c.Conn()}
	ended := false
	defer func() {
		t.done = true
		if !ended {
			db.abort(c)
		}
	}()
	err = fn(t)
	t.done = true
	ended = true
	if _, rerr := c.Exec(ctx, "ROLLBACK"); rerr != nil {
		db.abortConn(c)
		if err == nil {
			err = db.wrap("end", rerr)
		}
	}
	return err
}

// Update implements kv.Engine.
func (db *DB) Update(fn func(kv.Tx) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	for attempt := 0; ; attempt++ {
		err := db.update(fn)
		if err == nil || !retryable(err) || attempt >= db.opts.Retries {
			return err
		}
		db.retries.Add(1)
		// Jittered, growing backoff: two writers that collided must not
		// collide again in step.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6))))
	}
}

func (db *DB) update(fn func(kv.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.Timeout)
	defer cancel()
	c, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	w := db.newWrites()
	t := &tx{db: db, ctx: ctx, c: c.Conn(), write: true, w: w}
	ended := false
	defer func() {
		t.done = true
		if !ended {
			db.abortWrite(c)
		}
	}()
	if err := fn(t); err != nil {
		ended = true
		t.done = true
		db.abortWrite(c)
		return err
	}
	err = t.flush()
	t.done = true
	ended = true
	if err != nil {
		db.abortWrite(c)
		return err
	}
	if err := db.end(ctx, c, "COMMIT"); err != nil {
		return db.wrap("commit", err)
	}
	db.committed(w)
	return nil
}

// begin acquires a connection, takes the store's writer lock and opens a
// write transaction. The lock is the session's, taken before BEGIN: the
// transaction's snapshot is taken by its first statement, and one taken
// while waiting for the lock would predate the commit of the writer it
// waited for.
func (db *DB) begin(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, db.wrap("connect", err)
	}
	q := fmt.Sprintf("SET lock_timeout = %d; SELECT pg_advisory_lock(%d)", db.opts.LockTimeout.Milliseconds(), db.lockID)
	if _, err := c.Exec(ctx, q); err != nil {
		// Not held: a lock wait that timed out holds nothing.
		db.abortConn(c)
		c.Release()
		return nil, db.wrap("lock", err)
	}
	if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		db.abortConn(c)
		c.Release()
		return nil, db.wrap("begin", err)
	}
	return c, nil
}

// end ends c's write transaction with COMMIT or ROLLBACK and gives the
// writer lock back. On any failure the connection is closed, which gives
// the lock back too: a pooled connection never keeps it.
func (db *DB) end(ctx context.Context, c *pgxpool.Conn, how string) error {
	_, err := c.Exec(ctx, fmt.Sprintf("%s; SELECT pg_advisory_unlock(%d)", how, db.lockID))
	if err != nil {
		db.abortConn(c)
	}
	return err
}

// abortWrite rolls back a write transaction, with a context of its own
// (the transaction's may have ended).
func (db *DB) abortWrite(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.ConnTimeout)
	defer cancel()
	_ = db.end(ctx, c, "ROLLBACK")
}

// abort rolls back c's transaction; a connection that cannot is dropped.
func (db *DB) abort(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.ConnTimeout)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		db.abortConn(c)
	}
}

// abortConn closes c's connection, so the pool never hands out one left
// inside a transaction.
func (db *DB) abortConn(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Conn().Close(ctx)
}

// retryable reports a failure that running the transaction again can cure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// wrap turns a driver error into one of kv's, naming the store but never
// its password.
func (db *DB) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "55P03":
			return &pgError{db: db, op: op, err: err, kind: kv.ErrBusy}
		case pe.Code == "23505" && pe.TableName == storesTable:
			// Another engine created the store first (newstore.go).
			return &pgError{db: db, op: op + " store " + db.opts.Table, err: err, kind: fs.ErrExist}
		case retryable(err):
			return &pgError{db: db, op: op, err: err}
		case pe.Code == "28P01" || pe.Code == "28000" || pe.Code == "3D000" || pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P03":
			return &pgError{db: db, op: op, err: err, kind: kv.ErrUnavailable}
		}
		return &pgError{db: db, op: op, err: err}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return &pgError{db: db, op: op, err: err, kind: kv.ErrUnavailable}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The transaction outran Options.Timeout: the caller's bound, not
		// the server's absence.
		return &pgError{db: db, op: op + " (past the transaction's time limit)", err: err}
	}
	if pgconn.SafeToRetry(err) || isNetErr(err) {
		return &pgError{db: db, op: op, err: err, kind: kv.ErrUnavailable}
	}
	return &pgError{db: db, op: op, err: err}
}

// pgError is a driver error with the store's redacted address. Its
// message has the password scrubbed out. It unwraps to its kv sentinel
// alone when it has one (the driver's chain holds errnos, ENOENT for a
// missing socket, that would otherwise decide its kind), else to the
// driver's error, so a PgError's code can be read.
type pgError struct {
	db   *DB
	op   string
	err  error
	kind error
}

func (e *pgError) Error() string {
	msg := e.err.Error()
	if e.db.secret != "" {
		msg = replaceAll(msg, e.db.secret, "xxxxx")
	}
	if e.kind != nil {
		return fmt.Sprintf("%s: %s: %v: %s", e.db.where, e.op, e.kind, msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.db.where, e.op, msg)
}

func (e *pgError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind}
	}
	return []error{e.err}
}
