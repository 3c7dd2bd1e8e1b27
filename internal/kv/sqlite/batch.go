package sqlite

import (
	"errors"

	"github.com/agentvfs/agentvfs/internal/kv"
)

var errBatchDone = errors.New("kv/sqlite: batch already ended")

// batch is an open write transaction on the writer connection; each step
// runs inside a savepoint, so a failed step is undone alone.
type batch struct {
	db   *DB
	c    *conn
	done bool
}

var _ kv.Batcher = (*DB)(nil)

// Batch implements kv.Batcher.
func (db *DB) Batch() (kv.Batch, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	db.wmu.Lock()
	c := db.w
	if err := c.exec1(c.beginImm); err != nil {
		_ = c.rollback()
		db.wmu.Unlock()
		db.running.Done()
		return nil, wrapErr(db.path, "begin batch", err)
	}
	return &batch{db: db, c: c}, nil
}

func (b *batch) Step(fn func(kv.Tx) error) (err error) {
	if b.done {
		return errBatchDone
	}
	c := b.c
	if err := c.exec1(c.savepoint); err != nil {
		return wrapErr(b.db.path, "savepoint", err)
	}
	t := &tx{c: c, write: true}
	kept := false
	defer func() {
		t.done = true
		if !kept {
			// fn failed or panicked: undo what it did, keep the batch.
			if rerr := c.exec1(c.rollbackTo); rerr == nil {
				rerr = c.exec1(c.release)
				if rerr != nil && err == nil {
					err = wrapErr(b.db.path, "release", rerr)
				}
			} else if err == nil {
				err = wrapErr(b.db.path, "rollback to", rerr)
			}
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	t.done = true
	if err := c.exec1(c.release); err != nil {
		return wrapErr(b.db.path, "release", err)
	}
	kept = true
	return nil
}

func (b *batch) Read(fn func(kv.Tx) error) error {
	if b.done {
		return errBatchDone
	}
	t := &tx{c: b.c}
	defer func() { t.done = true }()
	return fn(t)
}

func (b *batch) Commit() error {
	if b.done {
		return errBatchDone
	}
	err := b.c.exec1(b.c.commit)
	if err != nil {
		_ = b.c.rollback()
	} else {
		b.db.committed()
	}
	b.end()
	return wrapErr(b.db.path, "commit", err)
}

func (b *batch) Rollback() error {
	if b.done {
		return errBatchDone
	}
	err := b.c.rollback()
	b.end()
	return wrapErr(b.db.path, "rollback", err)
}

func (b *batch) end() {
	b.done = true
	b.db.wmu.Unlock()
	b.db.running.Done()
}
