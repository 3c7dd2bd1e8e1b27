package vfs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// DeferSync asks the vault's engine to commit without waiting for the
// disk (kv.Syncer): a returned Update then survives a crash of the process
// but not of the machine, until Sync. It reports false, changing nothing,
// when the engine cannot defer; its commits then stay fully synced.
func (v *Vault) DeferSync(on bool) (bool, error) {
	s, ok := v.eng.(kv.Syncer)
	if !ok {
		return false, nil
	}
	if err := s.DeferSync(on); err != nil {
		if errors.Is(err, kv.ErrNoDeferredSync) {
			return false, nil
		}
		return false, storageErr("sync", v.Name(), err)
	}
	return true, nil
}

// Sync is a durability barrier: every Update that returned before it is
// on disk when it returns nil. Without deferred sync it costs nothing.
func (v *Vault) Sync() error {
	if s, ok := v.eng.(kv.Syncer); ok {
		return storageErr("sync", v.Name(), s.Sync())
	}
	return nil
}

// Chunk is the content of one chunk of a file, from the chunk's start:
// bytes past len(Data), up to the file's size, read as zeros.
type Chunk struct {
	Index uint64
	Data  []byte
}

// WriteChunks stores whole chunks of regular file ino, sets its size to
// at least size, its mtime to mtime (unless zero) and its ctime to ctime
// if that is later: what a write-back cache persists for a file it
// buffered, with the times it reported for the writes, not the time of
// the persist (which would change a file's ctime while nothing changed
// it, as a program that compares stats sees it). The
// caller holds the full content of each chunk (it read the stored part
// before changing it), so nothing is read back. A chunk that holds what
// the file already holds there costs a lookup, not a write: programs
// rewrite whole files to change a part of them. Quotas are charged as
// Write does. ENOENT means the inode is gone.
func (t *Tx) WriteChunks(ino Ino, size uint64, mtime, ctime time.Time, chunks []Chunk) error {
	const op = "write"
	if err := t.writable(op); err != nil {
		return err
	}
	n, err := t.fileInode(op, ino)
	if err != nil {
		return err
	}
	newSize := max(n.Size, size)
	if err := t.checkFileSize(op, "", newSize); err != nil {
		return err
	}
	if err := t.charge(op, "", int64(newSize-n.Size), 0); err != nil {
		return err
	}
	data := make([][]byte, len(chunks))
	for i, c := range chunks {
		start := c.Index * ChunkSize
		if len(c.Data) > ChunkSize || start >= newSize && len(c.Data) > 0 {
			return errs.E(op, "", syscall.EINVAL)
		}
		d := c.Data[:min(uint64(len(c.Data)), newSize-min(start, newSize))]
		data[i] = bytes.TrimRight(d, "\x00")
	}
	sums := hashChunks(data)
	for i, c := range chunks {
		var old []byte
		var ok bool
		if c.Index*ChunkSize < n.Size { // no file maps a chunk past its end (fsck)
			if old, _, ok, err = t.chunkRef(n, c.Index); err != nil {
				return err
			}
		}
		hole := len(data[i]) == 0
		if hole && !ok || !hole && ok && bytes.Equal(old, sums[i][:]) {
			continue // the file holds this content already
		}
		if err := t.putChunkSum(n, c.Index, data[i], sums[i]); err != nil {
			return err
		}
	}
	n.Size = newSize
	if !mtime.IsZero() {
		n.Mtime = mtime
	}
	if ctime.After(n.Ctime) {
		n.Ctime = ctime
	}
	return t.putInode(n)
}

// hashChunks returns the SHA-256 of each non-empty data. Past a few
// chunks it hashes on up to GOMAXPROCS cores: at about 1.6 GB/s a core,
// hashing was most of the CPU time an fsync after a 1 MiB write cost.
func hashChunks(data [][]byte) [][sha256.Size]byte {
	sums := make([][sha256.Size]byte, len(data))
	total := 0
	for _, d := range data {
		total += len(d)
	}
	workers := min(runtime.GOMAXPROCS(0), len(data))
	if workers <= 1 || total < 4*ChunkSize {
		for i, d := range data {
			if len(d) > 0 {
				sums[i] = sha256.Sum256(d)
			}
		}
		return sums
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(data); i += workers {
				if len(data[i]) > 0 {
					sums[i] = sha256.Sum256(data[i])
				}
			}
		})
	}
	wg.Wait()
	return sums
}

// Batch keeps one write transaction of the working state open across
// many operations (kv.Batcher): each Update is one step that is undone
// alone when it fails, and nothing is kept before Commit. The FUSE mount
// uses it so that a create or a rename costs its own writes rather than a
// commit each. While a batch is open it holds the vault's write lock: other
// writers wait, and readers outside it see the state of the last commit.
// A Batch is not safe for concurrent use.
type Batch struct {
	v     *Vault
	kb    kv.Batch
	chain *chain // the working state's chain, from the first step on
	step  *Tx    // the transaction of the step under way
	// The counters its steps changed, written at Commit (counters.go):
	// the top layer's usage (nil: unchanged) and the next inode number
	// (0: none allocated).
	usage *layerRecord
	ino   uint64
}

// Batch begins a batch. An engine without batches gives an error wrapping
// kv.ErrNoBatch.
func (v *Vault) Batch() (*Batch, error) {
	if err := v.checkGuard(); err != nil {
		return nil, err
	}
	bt, ok := v.eng.(kv.Batcher)
	if !ok {
		return nil, storageErr("batch", v.Name(), kv.ErrNoBatch)
	}
	kb, err := bt.Batch()
	if err != nil {
		return nil, storageErr("batch", v.Name(), err)
	}
	return &Batch{v: v, kb: kb}, nil
}

// Update runs fn as one step of the batch: on error nothing of fn is kept
// and the batch goes on.
func (b *Batch) Update(fn func(*Tx) error) error {
	if err := b.v.checkGuard(); err != nil {
		return err
	}
	err := b.kb.Step(b.v.body(txSpec{write: true, latest: true, batch: b}, fn))
	switch {
	case err == nil && b.step != nil:
		b.adopt(b.step)
	case err != nil && b.step != nil && b.v.cache != nil:
		b.v.cache.forget(b.step.written...) // the step is undone
	}
	b.step = nil
	return storageErr("", b.v.Name(), err)
}

// View runs fn read-only on the batch's state, its uncommitted steps
// included.
func (b *Batch) View(fn func(*Tx) error) error {
	err := b.kb.Read(b.v.body(txSpec{latest: true, batch: b}, fn))
	b.step = nil
	return storageErr("", b.v.Name(), err)
}

// Commit keeps every step and ends the batch. When it fails, nothing of
// the batch is kept.
func (b *Batch) Commit() error {
	err := b.flushCounters()
	if err == nil {
		err = b.kb.Commit()
	} else {
		_ = b.kb.Rollback()
	}
	b.settled(err == nil)
	return storageErr("commit", b.v.Name(), err)
}

// Rollback drops every step and ends the batch.
func (b *Batch) Rollback() error {
	b.usage, b.ino = nil, 0
	err := b.kb.Rollback()
	b.settled(false)
	return storageErr("rollback", b.v.Name(), err)
}

// settled tells the vault's read cache how the batch ended.
func (b *Batch) settled(kept bool) {
	if b.v.cache != nil {
		b.v.cache.settled(kept)
	}
}
