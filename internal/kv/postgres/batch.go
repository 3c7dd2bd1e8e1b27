package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentvfs/agentvfs/internal/kv"
)

var errBatchDone = errors.New("kv/postgres: batch already ended")

var _ kv.Batcher = (*DB)(nil)

// batch is an open write transaction holding the table's writer lock.
// Each step runs inside a savepoint, queued with the step's writes: a
// step that fails before any of them were sent is undone by forgetting
// them, without a round trip.
type batch struct {
	db     *DB
	c      *pgxpool.Conn
	ctx    context.Context
	cancel context.CancelFunc
	w      *writes
	done   bool
}

// Batch implements kv.Batcher. The batch runs under Options.Timeout like
// any transaction: a mount commits its batches every few milliseconds.
func (db *DB) Batch() (kv.Batch, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.Timeout)
	c, err := db.begin(ctx)
	if err != nil {
		cancel()
		db.running.Done()
		return nil, err
	}
	return &batch{db: db, c: c, ctx: ctx, cancel: cancel, w: db.newWrites()}, nil
}

func (b *batch) tx(write bool) *tx {
	return &tx{db: b.db, ctx: b.ctx, c: b.c.Conn(), write: write, w: b.w}
}

func (b *batch) Step(fn func(kv.Tx) error) (err error) {
	if b.done {
		return errBatchDone
	}
	w := b.w
	mark, flushes := len(w.pending), w.flushes
	w.pending = append(w.pending, op{sql: "SAVEPOINT step"})
	t := b.tx(true)
	kept := false
	defer func() {
		t.done = true
		if kept {
			return
		}
		// fn failed or panicked: undo what it did, keep the batch.
		if w.flushes == flushes {
			w.pending = w.pending[:mark]
			return
		}
		// The savepoint was sent: what is pending is this step's alone.
		w.pending = w.pending[:0]
		if _, rerr := b.c.Exec(b.ctx, "ROLLBACK TO SAVEPOINT step; RELEASE SAVEPOINT step"); rerr != nil && err == nil {
			err = b.db.wrap("rollback to", rerr)
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	t.done = true
	w.pending = append(w.pending, op{sql: "RELEASE SAVEPOINT step"})
	kept = true
	return nil
}

func (b *batch) Read(fn func(kv.Tx) error) error {
	if b.done {
		return errBatchDone
	}
	t := b.tx(false)
	defer func() { t.done = true }()
	return fn(t)
}

func (b *batch) Commit() error {
	if b.done {
		return errBatchDone
	}
	err := b.tx(true).flush()
	if err == nil {
		err = b.db.wrap("commit", b.db.end(b.ctx, b.c, "COMMIT"))
		if err == nil {
			b.db.committed(b.w)
		}
	} else {
		b.db.abortWrite(b.c)
	}
	b.end()
	return err
}

func (b *batch) Rollback() error {
	if b.done {
		return errBatchDone
	}
	b.w.pending = nil
	err := b.db.end(b.ctx, b.c, "ROLLBACK")
	b.end()
	return b.db.wrap("rollback", err)
}

func (b *batch) end() {
	b.done = true
	b.c.Release()
	b.cancel()
	b.db.running.Done()
}
