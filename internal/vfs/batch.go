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
