package vfs

import "github.com/agentvfs/agentvfs/internal/kv"

// Two records change with almost every change of the tree: the top
// layer's usage counters and the next inode number. A transaction keeps
// them in memory and writes each once, when it ends. A batch keeps them
// across its steps and writes them once, at Commit: written by every step,
// the same two records cost two puts a step, and their pages a copy into
// each step's savepoint journal.

// loadUsage returns the top layer's usage record as this transaction
// sees it, the batch's uncommitted counters included.
func (t *Tx) loadUsage() (*layerRecord, error) {
	if t.usage != nil {
		return t.usage, nil
	}
	if b := t.batch; b != nil && b.usage != nil {
		u := *b.usage
		t.usage = &u
		return t.usage, nil
	}
	l, err := getLayer(t.own(), t.c.top)
	if err != nil {
		return nil, err
	}
	t.usage = l
	return t.usage, nil
}

// nextIno allocates an inode number (also used as a data generation).
func (t *Tx) nextIno() (uint64, error) {
	if t.ino == 0 {
		if b := t.batch; b != nil && b.ino != 0 {
			t.ino = b.ino
		} else {
			id, err := getU64(t.own(), metaNextIno)
			if err != nil {
				return 0, err
			}
			t.ino = id
		}
	}
	t.ino++
	return t.ino - 1, nil
}

// flushCounters ends a write transaction: it writes the counters it
// changed, unless it is a step of a batch, which takes them over when the
// step succeeds (Batch.Update).
func (t *Tx) flushCounters() error {
	if t.batch != nil {
		return nil
	}
	return putCounters(t.own(), t.c.top, t.usageIfChanged(), t.ino)
}

func (t *Tx) usageIfChanged() *layerRecord {
	if t.dirty {
		return t.usage
	}
	return nil
}

// putCounters writes the usage record of layer top unless it is nil, and
// the next inode number unless it is 0.
func putCounters(kt kv.Tx, top uint64, usage *layerRecord, ino uint64) error {
	if usage != nil {
		if err := kt.Put(layerKey(top), encodeLayer(usage)); err != nil {
			return err
		}
	}
	if ino != 0 {
		return kt.Put(metaKey(metaNextIno), u64(nil, ino))
	}
	return nil
}

// adopt takes over the counters of a step that succeeded.
func (b *Batch) adopt(t *Tx) {
	if t.dirty {
		b.usage = t.usage
	}
	if t.ino != 0 {
		b.ino = t.ino
	}
}

// flushCounters writes the counters the batch's steps changed, as a last
// step, before the batch commits.
func (b *Batch) flushCounters() error {
	if b.usage == nil && b.ino == 0 {
		return nil
	}
	err := b.kb.Step(func(kt kv.Tx) error { return putCounters(kt, b.chain.top, b.usage, b.ino) })
	b.usage, b.ino = nil, 0
	return err
}
