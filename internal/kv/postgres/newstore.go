package postgres

import (
	"context"
)

// A store Create adds with Options.Unique (on the fast path) is written
// with the engine's first commit, not one of its own: a fork's new vault,
// named at random, costs no commit beyond the one of its first keys.
// Until then its id is reserved (from the identity's sequence) and no
// other engine sees the store; Close writes it if no commit did, so a
// store Create made exists once its engine is closed. A creator killed
// before either leaves nothing. Without Unique two creators of one name
// would both be told yes, and the second learn otherwise only at its
// first commit (the store's name is unique: fs.ErrExist then).
const addStoreSQL = `INSERT INTO ` + storesTable + ` (name, id) OVERRIDING SYSTEM VALUE
	SELECT $1::text, $2::bigint WHERE NOT EXISTS (SELECT 1 FROM ` + storesTable + ` WHERE id = $2)`

// newWrites starts a write transaction's writes: with the store's row
// first while it is not written yet.
func (db *DB) newWrites() *writes {
	w := &writes{}
	if db.unwritten.Load() {
		w.pending = append(w.pending, op{addStoreSQL, []any{db.opts.Table, db.id}})
		w.addsStore = true
	}
	return w
}

// committed notes that w's transaction committed.
func (db *DB) committed(w *writes) {
	if w.addsStore {
		db.unwritten.Store(false)
	}
}

// writeStore writes the store's row if no commit has, in a transaction
// of its own.
func (db *DB) writeStore() error {
	if !db.unwritten.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.ConnTimeout)
	defer cancel()
	_, err := db.pool.Exec(ctx, addStoreSQL, db.opts.Table, db.id)
	if err == nil {
		db.unwritten.Store(false)
	}
	return db.wrap("create", err)
}
