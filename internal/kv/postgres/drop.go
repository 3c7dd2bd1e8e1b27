package postgres

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Drop removes store opts.Table (its pairs, its row and its lease) from
// the database dsn names, in one transaction under the store's writer
// lock (opts.Shared's, as its writers take it). A store that is not
// there is not an error; the errors are otherwise Open's. It costs a
// delete per pair (a 100,000-pair store is 100,000 index entries deleted,
// and vacuumed later), not DDL. An engine still open on the store after
// the drop writes rows no store names: drop only a store nobody uses.
func Drop(dsn string, opts *Options) error {
	db, err := Open(dsn, opts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.enter(); err != nil {
		return err
	}
	defer db.running.Done()
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.Timeout)
	defer cancel()
	c, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	var b pgx.Batch
	b.Queue(`DELETE FROM `+PairsTable+` WHERE store = $1`, db.id)
	b.Queue(`DELETE FROM `+storesTable+` WHERE id = $1`, db.id)
	b.Queue(`DELETE FROM `+leaseTable+` WHERE store = $1`, db.opts.Table)
	if err := c.Conn().SendBatch(ctx, &b).Close(); err != nil {
		db.abortWrite(c)
		return db.wrap("drop", err)
	}
	return db.wrap("drop", db.end(ctx, c, "COMMIT"))
}

// Stored is one store of a database, as List sees it.
type Stored struct {
	Name string
	// Age is how long ago it was created, by the server's clock.
	Age time.Duration
}

// List lists the stores of the database dsn names, by name. A database
// without avfs's tables has none; the errors are otherwise Open's.
func List(dsn string, opts *Options) ([]Stored, error) {
	db, err := open(dsn, opts, openNone)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.Timeout)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT name, (extract(epoch FROM now() - created) * 1e6)::bigint FROM `+storesTable+` ORDER BY name`)
	var out []Stored
	if err == nil {
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Stored, error) {
			var s Stored
			var us int64
			err := r.Scan(&s.Name, &us)
			s.Age = time.Duration(us) * time.Microsecond
			return s, err
		})
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, nil // no avfs tables yet
	}
	return out, db.wrap("list", err)
}
