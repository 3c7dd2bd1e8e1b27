package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// FormatVersion is the store format this build writes. A store of a
// higher version is refused with kv.ErrNewerFormat.
const FormatVersion = 1

// Application marks a database as an avfs store.
const Application = "avfs"

const metaTable = "avfs_meta"

// prepare checks the database is an avfs store of a known format (making
// it one when create is set and it holds nothing else) and that the table
// exists with the right shape (creating it when create is set). It runs
// as one write transaction under the store's metadata lock, so two hosts
// creating at once cannot both create.
func (db *DB) prepare(ctx context.Context, create bool) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return db.wrap("connect", err)
	}
	defer c.Release()
	t, err := c.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return db.wrap("begin", err)
	}
	defer t.Rollback(ctx)
	if create {
		if _, err := t.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(0x61766673)); err != nil {
			return db.wrap("lock", err)
		}
	}
	var hasMeta, hasTable bool
	var others int
	err = t.QueryRow(ctx, `SELECT
		to_regclass($1) IS NOT NULL,
		to_regclass($2) IS NOT NULL,
		(SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())`,
		metaTable, db.opts.Table).Scan(&hasMeta, &hasTable, &others)
	if err != nil {
		return db.wrap("inspect", err)
	}
	if !hasMeta {
		switch {
		case others > 0:
			return fmt.Errorf("%s: %w: the database holds %d tables of another program and no %s", db.where, kv.ErrForeign, others, metaTable)
		case !create:
			return fmt.Errorf("%s: no avfs store in this database: %w", db.where, os.ErrNotExist)
		}
		if _, err := t.Exec(ctx, `CREATE TABLE `+metaTable+` (key text PRIMARY KEY, value text NOT NULL)`); err != nil {
			return db.wrap("create", err)
		}
		if _, err := t.Exec(ctx, `INSERT INTO `+metaTable+` VALUES ('application', $1), ('format', $2)`,
			Application, strconv.Itoa(FormatVersion)); err != nil {
			return db.wrap("create", err)
		}
		if _, err := t.Exec(ctx, createLeases); err != nil {
			return db.wrap("create", err)
		}
	} else if err := db.checkMeta(ctx, t); err != nil {
		return err
	}
	switch {
	case hasTable && create:
		return fmt.Errorf("%s: table %s: %w", db.where, db.opts.Table, os.ErrExist)
	case hasTable:
		if err := db.checkTable(ctx, t); err != nil {
			return err
		}
	case create:
		if _, err := t.Exec(ctx, `CREATE TABLE "`+db.opts.Table+`" (k bytea PRIMARY KEY, v bytea NOT NULL)`); err != nil {
			return db.wrap("create", err)
		}
	default:
		return fmt.Errorf("%s: no table %s in this avfs store: %w", db.where, db.opts.Table, os.ErrNotExist)
	}
	if err := db.prepareShared(ctx, t); err != nil {
		return err
	}
	return db.wrap("commit", t.Commit(ctx))
}

func (db *DB) checkMeta(ctx context.Context, t pgx.Tx) error {
	meta := map[string]string{}
	rows, err := t.Query(ctx, `SELECT key, value FROM `+metaTable)
	if err != nil {
		return fmt.Errorf("%s: %s: %w: %v", db.where, metaTable, kv.ErrCorrupt, db.wrap("read", err))
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return fmt.Errorf("%s: %s: %w: %v", db.where, metaTable, kv.ErrCorrupt, db.wrap("read", err))
		}
		meta[k] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w: %v", db.where, metaTable, kv.ErrCorrupt, db.wrap("read", err))
	}
	if app := meta["application"]; app != Application {
		return fmt.Errorf("%s: %w: %s says application %q", db.where, kv.ErrForeign, metaTable, app)
	}
	v, err := strconv.Atoi(meta["format"])
	switch {
	case err != nil || v < 1:
		return fmt.Errorf("%s: %w: format %q in %s is not a version", db.where, kv.ErrCorrupt, meta["format"], metaTable)
	case v > FormatVersion:
		return fmt.Errorf("%s: %w: format %d, this build knows up to %d", db.where, kv.ErrNewerFormat, v, FormatVersion)
	}
	return nil
}

// checkTable refuses a pairs table that is not (k bytea primary key, v
// bytea not null): reading it as one would give wrong answers.
func (db *DB) checkTable(ctx context.Context, t pgx.Tx) error {
	return db.checkShape(ctx, t, db.opts.Table)
}

func (db *DB) checkShape(ctx context.Context, t pgx.Tx, table string) error {
	var shape string
	err := t.QueryRow(ctx, `SELECT coalesce(string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod) || ':' || a.attnotnull, ',' ORDER BY a.attnum), '')
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, table).Scan(&shape)
	if err != nil {
		return db.wrap("inspect", err)
	}
	var pk string
	err = t.QueryRow(ctx, `SELECT coalesce(string_agg(a.attname, ','), '') FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = to_regclass($1) AND i.indisprimary`, table).Scan(&pk)
	if err != nil {
		return db.wrap("inspect", err)
	}
	if shape != "k:bytea:true,v:bytea:true" || pk != "k" {
		return fmt.Errorf("%s: %w: table %s is (%s) keyed on (%s), want (k bytea, v bytea not null) keyed on k",
			db.where, kv.ErrCorrupt, table, shape, pk)
	}
	return nil
}

var _ = errors.New
