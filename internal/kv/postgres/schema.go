package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// FormatVersion is the store format this build writes. A store of a
// higher version is refused with kv.ErrNewerFormat; one of format 1 (a
// table per store) is migrated to this one when first opened (migrate.go).
//
//	1  a table "name"(k bytea PRIMARY KEY, v bytea NOT NULL) per store
//	2  every store's pairs in avfs_pairs, under the store's id
const FormatVersion = 2

// Application marks a database as an avfs store.
const Application = "avfs"

// The tables of a database holding avfs stores. A store is a row of
// avfs_stores, its pairs the rows of avfs_pairs under its id: creating
// one is an INSERT, not DDL, and a store's range scans are walks of the
// primary key within its id.
const (
	metaTable   = "avfs_meta"
	storesTable = "avfs_stores"
	// PairsTable holds every store's pairs.
	PairsTable = "avfs_pairs"
)

const (
	createMeta   = `CREATE TABLE ` + metaTable + ` (key text PRIMARY KEY, value text NOT NULL)`
	createStores = `CREATE TABLE ` + storesTable + ` (name text COLLATE "C" PRIMARY KEY,
		id bigint GENERATED ALWAYS AS IDENTITY UNIQUE, created timestamptz NOT NULL DEFAULT now())`
	createPairs = `CREATE TABLE ` + PairsTable + ` (store bigint NOT NULL, k bytea NOT NULL, v bytea NOT NULL,
		PRIMARY KEY (store, k))`
)

// The shapes checkShape wants: columns (name:type:not null) and key.
const (
	storesShape = "name:text:true,id:bigint:true,created:timestamp with time zone:true"
	pairsShape  = "store:bigint:true,k:bytea:true,v:bytea:true"
	kvShape     = "k:bytea:true,v:bytea:true" // a format-1 store table
)

// schemaLock is the transaction-scoped advisory lock of creating and
// migrating a database's tables.
const schemaLock = int64(0x61766673)

// verified holds, per DSN, the oid of the avfs_pairs whose shape this
// process has checked: opens after the first cost one round trip, and a
// table replaced since is checked again.
var verified sync.Map

// prepare finds (or, when create is set, adds) the engine's store and
// the shared one. The common case is one query, outside any transaction;
// anything it does not find as expected (no tables yet, an older format,
// a missing store to create, a shape not checked yet) is left to
// prepareSlow.
func (db *DB) prepare(ctx context.Context, create bool, dsn string) error {
	sharedName := ""
	if db.shared != nil {
		sharedName = db.shared.table
	}
	var app, format *string
	var id, sharedID *int64
	var oid uint32
	var reserved int64
	q := `SELECT
		(SELECT value FROM ` + metaTable + ` WHERE key = 'application'),
		(SELECT value FROM ` + metaTable + ` WHERE key = 'format'),
		(SELECT id FROM ` + storesTable + ` WHERE name = $1),
		(SELECT id FROM ` + storesTable + ` WHERE name = $2),
		'` + PairsTable + `'::regclass::oid`
	dest := []any{&app, &format, &id, &sharedID, &oid}
	if create && db.opts.Unique { // an id for the new store, written by its first commit (newstore.go)
		q += `, nextval(pg_get_serial_sequence('` + storesTable + `', 'id'))`
		dest = append(dest, &reserved)
	}
	err := db.pool.QueryRow(ctx, q, db.opts.Table, sharedName).Scan(dest...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // a table missing: a new or an older store
		return db.prepareSlow(ctx, create, dsn)
	}
	if err != nil {
		return db.wrap("inspect", err)
	}
	if app == nil || *app != Application || format == nil || *format != strconv.Itoa(FormatVersion) ||
		(db.shared != nil && sharedID == nil) {
		return db.prepareSlow(ctx, create, dsn)
	}
	if was, ok := verified.Load(dsn); !ok || was.(uint32) != oid {
		return db.prepareSlow(ctx, create, dsn)
	}
	if sharedID != nil {
		db.shared.id = *sharedID
	}
	switch {
	case id != nil && create:
		return fmt.Errorf("%s: store %s: %w", db.where, db.opts.Table, os.ErrExist)
	case id != nil:
		db.id = *id
		return nil
	case !create:
		return fmt.Errorf("%s: no store %s in this database: %w", db.where, db.opts.Table, os.ErrNotExist)
	case db.opts.Unique:
		db.id = reserved
		db.unwritten.Store(true)
		return nil
	}
	err = db.pool.QueryRow(ctx, `INSERT INTO `+storesTable+` (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id`,
		db.opts.Table).Scan(&db.id)
	if errors.Is(err, pgx.ErrNoRows) { // another creator won
		return fmt.Errorf("%s: store %s: %w", db.where, db.opts.Table, os.ErrExist)
	}
	return db.wrap("create", err)
}

// prepareSlow checks the database is an avfs store of a known format
// (making it one when create is set and it holds nothing else, migrating
// a format-1 one) and that the store exists (adding it when create is
// set). It runs as one transaction under the schema lock, so two hosts
// creating or migrating at once cannot both do it.
func (db *DB) prepareSlow(ctx context.Context, create bool, dsn string) error {
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
	if _, err := t.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLock); err != nil {
		return db.wrap("lock", err)
	}
	var hasMeta bool
	var others int
	err = t.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		(SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())`, metaTable).Scan(&hasMeta, &others)
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
		for _, q := range []string{createMeta, createStores, createPairs, createLeases} {
			if _, err := t.Exec(ctx, q); err != nil {
				return db.wrap("create", err)
			}
		}
		if _, err := t.Exec(ctx, `INSERT INTO `+metaTable+` VALUES ('application', $1), ('format', $2)`,
			Application, strconv.Itoa(FormatVersion)); err != nil {
			return db.wrap("create", err)
		}
	} else {
		v, err := db.checkMeta(ctx, t)
		if err != nil {
			return err
		}
		if v == 1 {
			if err := db.migrate1(ctx, t); err != nil {
				return err
			}
		}
		if err := db.checkShape(ctx, t, storesTable, storesShape, "name"); err != nil {
			return err
		}
	}
	if err := db.checkShape(ctx, t, PairsTable, pairsShape, "store,k"); err != nil {
		return err
	}
	var oid uint32
	if err := t.QueryRow(ctx, `SELECT '`+PairsTable+`'::regclass::oid`).Scan(&oid); err != nil {
		return db.wrap("inspect", err)
	}
	id, err := storeID(ctx, t, db.opts.Table)
	switch {
	case err != nil:
		return db.wrap("inspect", err)
	case id != 0 && create:
		return fmt.Errorf("%s: store %s: %w", db.where, db.opts.Table, os.ErrExist)
	case id == 0 && !create:
		return fmt.Errorf("%s: no store %s in this database: %w", db.where, db.opts.Table, os.ErrNotExist)
	case id == 0:
		if id, err = addStore(ctx, t, db.opts.Table); err != nil {
			return db.wrap("create", err)
		}
	}
	db.id = id
	if db.shared != nil {
		sid, err := storeID(ctx, t, db.shared.table)
		if err == nil && sid == 0 {
			sid, err = addStore(ctx, t, db.shared.table)
		}
		if err != nil {
			return db.wrap("create", err)
		}
		db.shared.id = sid
	}
	if err := t.Commit(ctx); err != nil {
		return db.wrap("commit", err)
	}
	verified.Store(dsn, oid)
	return nil
}

// storeID is the id of store name, 0 when there is none.
func storeID(ctx context.Context, t pgx.Tx, name string) (int64, error) {
	var id int64
	err := t.QueryRow(ctx, `SELECT id FROM `+storesTable+` WHERE name = $1`, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

func addStore(ctx context.Context, t pgx.Tx, name string) (int64, error) {
	var id int64
	err := t.QueryRow(ctx, `INSERT INTO `+storesTable+` (name) VALUES ($1) RETURNING id`, name).Scan(&id)
	return id, err
}

// checkMeta refuses a database that is not avfs's or of a newer format,
// and returns its format.
func (db *DB) checkMeta(ctx context.Context, t pgx.Tx) (int, error) {
	meta := map[string]string{}
	rows, err := t.Query(ctx, `SELECT key, value FROM `+metaTable)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w: %v", db.where, metaTable, kv.ErrCorrupt, db.wrap("read", err))
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return 0, fmt.Errorf("%s: %s: %w: %v", db.where, metaTable, kv.ErrCorrupt, db.wrap("read", err))
		}
		meta[k] = v
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("%s: %s: %w: %v", db.where, metaTable, kv.ErrCorrupt, db.wrap("read", err))
	}
	if app := meta["application"]; app != Application {
		return 0, fmt.Errorf("%s: %w: %s says application %q", db.where, kv.ErrForeign, metaTable, app)
	}
	v, err := strconv.Atoi(meta["format"])
	switch {
	case err != nil || v < 1:
		return 0, fmt.Errorf("%s: %w: format %q in %s is not a version", db.where, kv.ErrCorrupt, meta["format"], metaTable)
	case v > FormatVersion:
		return 0, fmt.Errorf("%s: %w: format %d, this build knows up to %d", db.where, kv.ErrNewerFormat, v, FormatVersion)
	}
	return v, nil
}

// checkShape refuses a table whose columns or primary key are not the
// ones wanted: reading it as one of avfs's would give wrong answers.
func (db *DB) checkShape(ctx context.Context, t pgx.Tx, table, wantShape, wantKey string) error {
	shape, key, err := tableShape(ctx, t, table)
	if err != nil {
		return db.wrap("inspect", err)
	}
	if shape != wantShape || key != wantKey {
		return fmt.Errorf("%s: %w: table %s is (%s) keyed on (%s), want (%s) keyed on (%s)",
			db.where, kv.ErrCorrupt, table, shape, key, wantShape, wantKey)
	}
	return nil
}

// tableShape is table's columns (name:type:not null, in order) and its
// primary key's columns; both empty when there is no such table.
func tableShape(ctx context.Context, t pgx.Tx, table string) (shape, key string, err error) {
	err = t.QueryRow(ctx, `SELECT coalesce(string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod) || ':' || a.attnotnull, ',' ORDER BY a.attnum), '')
		FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, table).Scan(&shape)
	if err != nil {
		return "", "", err
	}
	err = t.QueryRow(ctx, `SELECT coalesce(string_agg(a.attname, ',' ORDER BY a.attnum), '') FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = to_regclass($1) AND i.indisprimary`, table).Scan(&key)
	return shape, key, err
}
