package postgres

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Shared keeps the keys under Prefix in Table, one table that every store
// of the database naming it shares, in the same transactions as the
// store's own table (both tables are read and written on one connection).
// avfs keeps the chunks of every vault of a store there: identical
// content is stored once, and a fork on another host copies nothing.
//
// The writers of all the stores sharing a table queue on one lock, as
// one store's do: a writer holds the lock of every store of the space
// (so a mount's batch, which holds it from its first step to its commit,
// delays the writers of other vaults of the store by as long).
//
// What the store's Scans and Deletes see of the range is everyone's: a
// caller must not treat a key there as its own to free (a collection
// must consider every store that shares the table).
type Shared struct {
	Prefix []byte
	Table  string
}

// shared is a store's Shared, with its statements.
type shared struct {
	prefix, end []byte // end: kv.PrefixEnd(prefix), nil when unbounded
	table       string
	sql         statements
}

// span is one part of a scan: a range and the table it is read from.
type span struct {
	sql        *statements
	start, end []byte
}

// stmts are the statements of the table that holds key.
func (db *DB) stmts(key []byte) *statements {
	if db.shared != nil && bytes.HasPrefix(key, db.shared.prefix) {
		return &db.shared.sql
	}
	return &db.sql
}

// split cuts [start, end) at the shared range's bounds (nil end: no
// bound), in key order.
func (sh *shared) split(start, end []byte) []span {
	// less reports a < b, a nil b being +infinity.
	less := func(a, b []byte) bool { return b == nil || (a != nil && bytes.Compare(a, b) < 0) }
	minEnd := func(a, b []byte) []byte {
		if less(a, b) {
			return a
		}
		return b
	}
	maxStart := func(a, b []byte) []byte {
		if bytes.Compare(a, b) > 0 {
			return a
		}
		return b
	}
	var out []span
	add := func(sql *statements, s, e []byte) {
		if s != nil && less(s, e) {
			out = append(out, span{sql, s, e})
		}
	}
	add(nil, start, minEnd(end, sh.prefix))
	add(&sh.sql, maxStart(start, sh.prefix), minEnd(end, sh.end))
	if sh.end != nil {
		add(nil, maxStart(start, sh.end), end)
	}
	return out
}

func newShared(o *Shared) (*shared, error) {
	if o == nil {
		return nil, nil
	}
	if len(o.Prefix) == 0 || !tableRE.MatchString(o.Table) || o.Table == metaTable || o.Table == leaseTable {
		return nil, fmt.Errorf("kv/postgres: shared range: want a prefix and a table name of lower-case letters, digits and _, have %q", o.Table)
	}
	return &shared{prefix: bytes.Clone(o.Prefix), end: kv.PrefixEnd(o.Prefix), table: o.Table, sql: newStatements(o.Table)}, nil
}

// prepareShared makes the shared table when it is missing, or checks its
// shape, inside prepare's transaction.
func (db *DB) prepareShared(ctx context.Context, t pgx.Tx) error {
	if db.shared == nil {
		return nil
	}
	if _, err := t.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(0x61766673)); err != nil {
		return db.wrap("lock", err)
	}
	var has bool
	if err := t.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, db.shared.table).Scan(&has); err != nil {
		return db.wrap("inspect", err)
	}
	if !has {
		_, err := t.Exec(ctx, `CREATE TABLE "`+db.shared.table+`" (k bytea PRIMARY KEY, v bytea NOT NULL)`)
		return db.wrap("create", err)
	}
	return db.checkShape(ctx, t, db.shared.table)
}
