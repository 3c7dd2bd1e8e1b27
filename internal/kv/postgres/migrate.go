package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// migrate1 turns a format-1 database (a table per store) into this
// format inside prepare's transaction, under the schema lock: every table
// of a store's shape becomes a row of avfs_stores and its pairs rows of
// avfs_pairs, then is dropped. The migration commits whole or not at all,
// so a host killed during it leaves the format-1 store as it was. Tables
// of other shapes are not stores and are left alone.
func (db *DB) migrate1(ctx context.Context, t pgx.Tx) error {
	rows, err := t.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()
		AND tablename NOT IN ($1, $2) ORDER BY tablename`, metaTable, leaseTable)
	if err != nil {
		return db.wrap("migrate", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return db.wrap("migrate", err)
	}
	for _, q := range []string{createStores, createPairs} {
		if _, err := t.Exec(ctx, q); err != nil {
			return db.wrap("migrate", err)
		}
	}
	for _, name := range names {
		shape, key, err := tableShape(ctx, t, name)
		if err != nil {
			return db.wrap("migrate", err)
		}
		if shape != kvShape || key != "k" || !tableRE.MatchString(name) {
			continue
		}
		id, err := addStore(ctx, t, name)
		if err != nil {
			return db.wrap("migrate", err)
		}
		q := `INSERT INTO ` + PairsTable + ` (store, k, v) SELECT ` + strconv.FormatInt(id, 10) + `, k, v FROM "` + name + `"; DROP TABLE "` + name + `"`
		if _, err := t.Exec(ctx, q); err != nil {
			return db.wrap("migrate", err)
		}
	}
	_, err = t.Exec(ctx, `UPDATE `+metaTable+` SET value = $1 WHERE key = 'format'`, strconv.Itoa(FormatVersion))
	return db.wrap("migrate", err)
}
