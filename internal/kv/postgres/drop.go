package postgres

import (
	"context"
	"errors"
	"io/fs"
)

// Drop removes store table opts.Table (and its lease) from the database
// dsn names. A table that is not there is not an error; the errors are
// otherwise Open's. Running transactions of other engines on the table
// fail once it is gone: drop only a store nobody uses.
func Drop(dsn string, opts *Options) error {
	db, err := Open(dsn, opts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.ConnTimeout+db.opts.LockTimeout)
	defer cancel()
	_, err = db.pool.Exec(ctx, `DROP TABLE IF EXISTS "`+db.opts.Table+`"; DELETE FROM `+leaseTable+` WHERE store = '`+db.opts.Table+`'`)
	return db.wrap("drop", err)
}
