package fusefs

// Persisting the write-back cache: the background persister and the
// batches that move buffered chunks into the vault (writeback.go has the
// states and the records).

import (
	"slices"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func (w *writeback) run() {
	defer close(w.done)
	t := time.NewTicker(w.idle / 2)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		w.persistDue()
	}
}

// persistDue persists the inodes idle for long enough and, over budget,
// the oldest dirty ones until half the budget is free.
func (w *writeback) persistDue() {
	now := time.Now()
	w.mu.Lock()
	var due, rest []*wfile
	for _, f := range w.files {
		if now.Sub(f.last) >= w.idle {
			due = append(due, f)
		} else {
			rest = append(rest, f)
		}
	}
	if need := w.mem - w.budget/2; w.mem > w.budget {
		for _, f := range due {
			need -= f.mem
		}
		slices.SortFunc(rest, func(a, b *wfile) int { return a.first.Compare(b.first) })
		for _, f := range rest {
			if need <= 0 {
				break
			}
			due = append(due, f)
			need -= f.mem
		}
	}
	w.mu.Unlock()
	if len(due) > 0 {
		_ = w.persist(due)
	}
}

func (w *writeback) persistAll() error {
	w.mu.Lock()
	all := make([]*wfile, 0, len(w.files))
	for _, f := range w.files {
		all = append(all, f)
	}
	w.mu.Unlock()
	return w.persist(all)
}

// persist writes the buffered chunks of files to the vault in one
// transaction. It holds each file's lock across the commit, so a file is
// never seen half persisted.
func (w *writeback) persist(files []*wfile) error {
	if len(files) == 0 {
		return nil
	}
	w.persistMu.Lock()
	defer w.persistMu.Unlock()
	slices.SortFunc(files, func(a, b *wfile) int { return int(a.ino) - int(b.ino) })
	var batch []*wfile
	for _, f := range files {
		f.mu.Lock()
		if f.state != stateDirty {
			f.mu.Unlock() // persisted or dropped meanwhile
			continue
		}
		f.state = statePersisting
		batch = append(batch, f)
	}
	if len(batch) == 0 {
		return nil
	}
	gone := map[vfs.Ino]bool{}
	if w.quota.MaxSizeMB > 0 {
		w.quotaMu.Lock()
	}
	err := w.st.update(func(tx *vfs.Tx) error {
		clear(gone)
		for _, f := range batch {
			chunks := make([]vfs.Chunk, 0, len(f.chunks))
			for i, data := range f.chunks {
				chunks = append(chunks, vfs.Chunk{Index: i, Data: data})
			}
			err := tx.WriteChunks(f.ino, f.size, f.mtime, f.ctime, chunks)
			if errs.Errno(err) == syscall.ENOENT {
				gone[f.ino] = true // unlinked: its data went with it
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	w.mu.Lock()
	if err == nil {
		w.failed = nil
		for _, f := range batch {
			w.detach(f)
		}
		w.gen++
	} else {
		w.failed = err
		for _, f := range batch {
			f.state = stateDirty
		}
	}
	w.cond.Broadcast()
	w.mu.Unlock()
	if w.quota.MaxSizeMB > 0 {
		w.quotaMu.Unlock()
	}
	for _, f := range batch {
		f.mu.Unlock()
	}
	if err != nil && w.logger != nil {
		w.logger.Printf("persisting %d files: %v", len(batch), err)
	}
	return err
}

// detach ends f's record: flushed, its memory and reservation given back.
// w.mu and f.mu are held.
func (w *writeback) detach(f *wfile) {
	f.state = stateFlushed
	if w.files[f.ino] == f {
		delete(w.files, f.ino)
	}
	w.mem -= f.mem
	if f.size > f.base {
		w.reserved -= int64(f.size - f.base)
	}
	for _, b := range f.chunks {
		if cap(b) == vfs.ChunkSize {
			//lint:ignore SA6002 a slice header is small; the buffer is what is pooled
			w.pool.Put(b[:0])
		}
	}
	f.chunks, f.mem = nil, 0
}

// flush persists ino if it is dirty, and waits for a batch persisting it.
func (w *writeback) flush(ino vfs.Ino) syscall.Errno {
	f := w.lookup(ino)
	if f == nil {
		return 0
	}
	if err := w.persist([]*wfile{f}); err != nil {
		return errs.Errno(err)
	}
	// A batch that held f when persist looked: wait for its commit.
	f.mu.Lock()
	st := f.state
	f.mu.Unlock()
	if st != stateFlushed {
		w.mu.Lock()
		err := w.failed
		w.mu.Unlock()
		if err != nil {
			return errs.Errno(err)
		}
	}
	return 0
}

// fsync is the durability barrier of ino (any inode: a directory's fsync
// makes its entries durable, which the sync of the whole log does).
func (w *writeback) fsync(ino vfs.Ino) syscall.Errno {
	if w == nil {
		return 0
	}
	if e := w.flush(ino); e != 0 {
		return e
	}
	if err := w.st.sync(); err != nil {
		return errs.Errno(err)
	}
	return 0
}

// fsyncAll persists every buffered file and syncs the vault.
func (w *writeback) fsyncAll() syscall.Errno {
	if w == nil {
		return 0
	}
	if err := w.persistAll(); err != nil {
		return errs.Errno(err)
	}
	if err := w.st.sync(); err != nil {
		return errs.Errno(err)
	}
	return 0
}
