package vfs

import (
	"errors"
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
// at least size and its mtime to mtime: what a write-back cache persists
// for a file it buffered (a zero mtime leaves the times alone). The caller holds the full content of each chunk
// (it read the stored part before changing it), so nothing is read back.
// Quotas are charged as Write does. ENOENT means the inode is gone.
func (t *Tx) WriteChunks(ino Ino, size uint64, mtime time.Time, chunks []Chunk) error {
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
	for _, c := range chunks {
		start := c.Index * ChunkSize
		if len(c.Data) > ChunkSize || start >= newSize && len(c.Data) > 0 {
			return errs.E(op, "", syscall.EINVAL)
		}
		data := c.Data[:min(uint64(len(c.Data)), newSize-min(start, newSize))]
		if err := t.putChunk(n, c.Index, data); err != nil {
			return err
		}
	}
	n.Size = newSize
	if !mtime.IsZero() {
		n.Mtime, n.Ctime = mtime, t.now
	}
	return t.putInode(n)
}

// Batch keeps one write transaction of the working state open across
// many operations (kv.Batcher): each Update is one step that is undone
// alone when it fails, and nothing is kept before Commit. The FUSE mount
// uses it so that a create or a rename costs its own writes rather than a
// commit each. While a batch is open it holds the vault's write lock: other
// writers wait, and readers outside it see the state of the last commit.
// A Batch is not safe for concurrent use.
type Batch struct {
	v  *Vault
	kb kv.Batch
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
	return storageErr("", b.v.Name(), b.kb.Step(b.v.body(true, nil, fn)))
}

// View runs fn read-only on the batch's state, its uncommitted steps
// included.
func (b *Batch) View(fn func(*Tx) error) error {
	return storageErr("", b.v.Name(), b.kb.Read(b.v.body(false, nil, fn)))
}

// Commit keeps every step and ends the batch.
func (b *Batch) Commit() error { return storageErr("commit", b.v.Name(), b.kb.Commit()) }

// Rollback drops every step and ends the batch.
func (b *Batch) Rollback() error { return storageErr("rollback", b.v.Name(), b.kb.Rollback()) }
