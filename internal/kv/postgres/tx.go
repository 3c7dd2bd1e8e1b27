package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// statements are the queries on avfs_pairs, the same for every store:
// $1 is always the store's id.
type statements struct {
	get, has, put, del string
	scan, scanTo       string // first page: k >= $2 (and k < $4)
	next, nextTo       string // later pages: k > $2
	// The scans again, returning each value's length (4 bytes, big
	// endian) or nothing in place of the value.
	sizes, keys *statements
}

// queries are the statements of every engine.
var queries = newStatements()

func newStatements() statements {
	s := scanStatements("v")
	sizes, keys := scanStatements("int4send(length(v))"), scanStatements("''::bytea")
	s.sizes, s.keys = &sizes, &keys
	return s
}

func scanStatements(value string) statements {
	const t = PairsTable
	sel := "SELECT k, " + value + " FROM " + t
	return statements{
		get:    "SELECT v FROM " + t + " WHERE store = $1 AND k = $2",
		has:    "SELECT 1 FROM " + t + " WHERE store = $1 AND k = $2",
		put:    "INSERT INTO " + t + " (store, k, v) VALUES ($1, $2, $3) ON CONFLICT (store, k) DO UPDATE SET v = EXCLUDED.v",
		del:    "DELETE FROM " + t + " WHERE store = $1 AND k = $2",
		scan:   sel + " WHERE store = $1 AND k >= $2 ORDER BY k LIMIT $3",
		scanTo: sel + " WHERE store = $1 AND k >= $2 AND k < $4 ORDER BY k LIMIT $3",
		next:   sel + " WHERE store = $1 AND k > $2 ORDER BY k LIMIT $3",
		nextTo: sel + " WHERE store = $1 AND k > $2 AND k < $4 ORDER BY k LIMIT $3",
	}
}

// Pending writes are sent when a read needs them, at commit, and when
// they pass these bounds.
const (
	maxPendingOps   = 512
	maxPendingBytes = 4 << 20
)

// Scan pages start small (most scans stop early or are short) and grow.
const (
	firstPage = 32
	maxPage   = 1024
)

var (
	errTxDone      = fmt.Errorf("kv/postgres: transaction has ended: %w", kv.ErrClosed)
	errWriteInScan = errors.New("kv/postgres: Put or Delete during a Scan")
)

// op is a write not yet sent (or a savepoint statement, args nil).
type op struct {
	sql  string
	args []any
}

// writes are a transaction's writes not yet sent; a batch's steps share
// them.
type writes struct {
	pending   []op
	bytes     int
	flushes   int  // how many times pending was sent
	addsStore bool // the store's row is among them (newstore.go)
}

// tx is one transaction (or one batch step) on one connection.
type tx struct {
	db       *DB
	ctx      context.Context
	c        *pgx.Conn
	write    bool
	done     bool
	scanning int
	w        *writes
}

var (
	_ kv.Tx    = (*tx)(nil)
	_ kv.Haser = (*tx)(nil)
)

func (t *tx) check() error {
	if t.done {
		return errTxDone
	}
	return t.flush()
}

// flush sends the pending writes in one pipelined round trip.
func (t *tx) flush() error {
	w := t.w
	if w == nil || len(w.pending) == 0 {
		return nil
	}
	var b pgx.Batch
	for _, o := range w.pending {
		b.Queue(o.sql, o.args...)
	}
	w.pending, w.bytes = w.pending[:0], 0
	w.flushes++
	return t.db.wrap("write", t.c.SendBatch(t.ctx, &b).Close())
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	var v []byte
	err := t.c.QueryRow(t.ctx, queries.get, t.db.storeOf(key), key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, kv.ErrNotFound
	}
	if err != nil {
		return nil, t.db.wrap("get", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *tx) Has(key []byte) (bool, error) {
	if err := t.check(); err != nil {
		return false, err
	}
	var one int
	err := t.c.QueryRow(t.ctx, queries.has, t.db.storeOf(key), key).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, t.db.wrap("get", err)
}

func (t *tx) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	return t.scanWith(func(s *statements) *statements { return s }, start, end, fn)
}

var (
	_ kv.SizeScanner = (*tx)(nil)
	_ kv.KeyScanner  = (*tx)(nil)
)

// ScanSizes implements kv.SizeScanner: the values stay on the server.
func (t *tx) ScanSizes(start, end []byte, fn func(key []byte, size int) (bool, error)) error {
	return t.scanWith(func(s *statements) *statements { return s.sizes }, start, end, func(k, v []byte) (bool, error) {
		if len(v) != 4 {
			return false, fmt.Errorf("kv/postgres: a size of %d bytes: %w", len(v), kv.ErrCorrupt)
		}
		return fn(k, int(binary.BigEndian.Uint32(v)))
	})
}

// ScanKeys implements kv.KeyScanner: the values stay on the server.
func (t *tx) ScanKeys(start, end []byte, fn func(key []byte) (bool, error)) error {
	return t.scanWith(func(s *statements) *statements { return s.keys }, start, end, func(k, _ []byte) (bool, error) {
		return fn(k)
	})
}

// scanWith is Scan with the statements pick chooses of each table's.
func (t *tx) scanWith(pick func(*statements) *statements, start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if err := t.check(); err != nil {
		return err
	}
	if start == nil {
		start = []byte{}
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	if t.db.shared == nil {
		_, err := t.scan(pick(&queries), t.db.id, start, end, fn)
		return err
	}
	// The shared keys are one contiguous range: the scan is the store's
	// part below it, the shared store's part, and the store's part above,
	// one after the other.
	for _, r := range t.db.shared.split(start, end) {
		id := t.db.id
		if r.shared {
			id = t.db.shared.id
		}
		more, err := t.scan(pick(&queries), id, r.start, r.end, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scan is Scan on one store; it reports whether fn wants more.
func (t *tx) scan(sql *statements, id int64, start, end []byte, fn func(key, value []byte) (bool, error)) (bool, error) {
	q, from, page := sql.scan, start, firstPage
	if end != nil {
		q = sql.scanTo
	}
	t.scanning++
	defer func() { t.scanning-- }()
	for {
		args := []any{id, from, page}
		if end != nil {
			args = append(args, end)
		}
		rows, err := t.c.Query(t.ctx, q, args...)
		if err != nil {
			return false, t.db.wrap("scan", err)
		}
		var ks, vs [][]byte
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return false, t.db.wrap("scan", err)
			}
			if v == nil {
				v = []byte{}
			}
			ks, vs = append(ks, k), append(vs, v)
		}
		if err := rows.Err(); err != nil {
			return false, t.db.wrap("scan", err)
		}
		for i := range ks {
			if t.done {
				return false, errTxDone
			}
			more, err := fn(ks[i], vs[i])
			if err != nil || !more {
				return false, err
			}
		}
		if len(ks) < page {
			return true, nil
		}
		from = ks[len(ks)-1]
		q = sql.next
		if end != nil {
			q = sql.nextTo
		}
		page = min(page*4, maxPage)
	}
}

func (t *tx) writable() error {
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

func (t *tx) Put(key, value []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	if len(key) == 0 {
		return kv.ErrEmptyKey
	}
	return t.queue(op{queries.put, []any{t.db.storeOf(key), bytes.Clone(key), append(make([]byte, 0, len(value)), value...)}}, len(key)+len(value))
}

func (t *tx) Delete(key []byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.queue(op{queries.del, []any{t.db.storeOf(key), bytes.Clone(key)}}, len(key))
}

func (t *tx) queue(o op, n int) error {
	w := t.w
	w.pending = append(w.pending, o)
	w.bytes += n
	if len(w.pending) >= maxPendingOps || w.bytes >= maxPendingBytes {
		return t.flush()
	}
	return nil
}

// isNetErr reports a failure of the connection itself.
func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

func replaceAll(s, old, repl string) string { return strings.ReplaceAll(s, old, repl) }
