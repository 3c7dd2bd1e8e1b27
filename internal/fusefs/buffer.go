package fusefs

// The data path of the write-back cache: writes buffered chunk by chunk,
// quotas checked when a write is accepted, reads of dirty inodes.

import (
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// write buffers a write. The quota is checked here, when the write is
// accepted.
func (w *writeback) write(ino vfs.Ino, data []byte, off int64) (int, syscall.Errno) {
	if off < 0 {
		return 0, syscall.EINVAL
	}
	if len(data) == 0 {
		return 0, 0
	}
	f, e := w.file(ino)
	if e != 0 {
		return 0, e
	}
	end := uint64(off) + uint64(len(data))
	if e := w.accept(f, end); e != 0 {
		f.mu.Unlock()
		return 0, e
	}
	var grown int64
	for pos := uint64(off); pos < end; {
		index := pos / vfs.ChunkSize
		start := index * vfs.ChunkSize
		lo, hi := pos-start, min(end, start+vfs.ChunkSize)-start
		buf, ok := f.chunks[index]
		if !ok && start < f.base && (lo > 0 || hi < min(vfs.ChunkSize, f.base-start)) {
			// A partial write of a stored chunk: start from its content.
			var err error
			if buf, grown, err = w.load(f, index, grown); err != nil {
				w.release(f, end)
				w.mu.Lock()
				f.mem += grown
				w.mem += grown
				w.mu.Unlock()
				f.mu.Unlock()
				return 0, w.st.errno("write", err)
			}
		}
		var g int64
		buf, g = w.grow(buf, int(hi))
		grown += g
		copy(buf[lo:hi], data[pos-uint64(off):])
		f.chunks[index] = buf
		pos = start + hi
	}
	f.size = max(f.size, end)
	f.mtime = time.Now()
	f.ctime = f.mtime
	w.mu.Lock()
	f.last = f.mtime
	f.mem += grown
	w.mem += grown
	w.mu.Unlock()
	f.mu.Unlock()
	w.throttle()
	return len(data), 0
}

// accept checks the file size and the vault size quotas for growing f to
// end and reserves the growth. f.mu is held.
func (w *writeback) accept(f *wfile, end uint64) syscall.Errno {
	if end <= f.size {
		return 0
	}
	if q := w.quota.MaxFileSizeMB; q > 0 && end > uint64(q)<<20 {
		return syscall.EFBIG
	}
	growth := int64(end - f.size)
	if w.quota.MaxSizeMB <= 0 {
		w.mu.Lock()
		w.reserved += growth
		w.mu.Unlock()
		return 0
	}
	w.quotaMu.Lock()
	defer w.quotaMu.Unlock()
	u, e := w.usage()
	if e != 0 {
		return e
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if u.Bytes+w.reserved+growth > w.quota.MaxSizeMB<<20 {
		return syscall.ENOSPC
	}
	w.reserved += growth
	return 0
}

// usage reads the vault's committed usage counters.
func (w *writeback) usage() (vfs.Usage, syscall.Errno) {
	var u vfs.Usage
	err := w.st.view(func(tx *vfs.Tx) (err error) {
		u, err = tx.Usage()
		return err
	})
	return u, errs.Errno(err)
}

// release gives back what accept reserved for a write that failed later.
func (w *writeback) release(f *wfile, end uint64) {
	if end > f.size {
		w.mu.Lock()
		w.reserved -= int64(end - f.size)
		w.mu.Unlock()
	}
}

// reserveGrowth checks that the vault may grow by growth bytes beside the
// reservations, for a size change made directly in the vault (truncate up,
// fallocate); fn runs the change while the check holds.
func (w *writeback) reserveGrowth(growth int64, fn func() syscall.Errno) syscall.Errno {
	if w == nil || w.quota.MaxSizeMB <= 0 || growth <= 0 {
		return fn()
	}
	w.quotaMu.Lock()
	defer w.quotaMu.Unlock()
	u, e := w.usage()
	if e != 0 {
		return e
	}
	w.mu.Lock()
	over := u.Bytes+w.reserved+growth > w.quota.MaxSizeMB<<20
	w.mu.Unlock()
	if over {
		return syscall.ENOSPC
	}
	return fn()
}

// load reads the stored part of chunk index of f into a buffer.
func (w *writeback) load(f *wfile, index uint64, grown int64) ([]byte, int64, error) {
	start := index * vfs.ChunkSize
	n := min(vfs.ChunkSize, f.base-start)
	buf, g := w.grow(nil, int(n))
	err := w.st.view(func(tx *vfs.Tx) error {
		_, err := tx.Read(f.ino, int64(start), buf)
		return err
	})
	return buf, grown + g, err
}

// grow returns buf with length at least n, zero-filled past its old
// length, and the capacity it added.
func (w *writeback) grow(buf []byte, n int) ([]byte, int64) {
	if n <= len(buf) {
		return buf, 0
	}
	if n <= cap(buf) {
		old := len(buf)
		buf = buf[:n]
		clear(buf[old:])
		return buf, 0
	}
	var nb []byte
	if n > vfs.ChunkSize/4 {
		nb = w.pool.Get().([]byte)[:n]
	} else {
		c := 512
		for c < n {
			c *= 2
		}
		nb = make([]byte, n, c)
	}
	copy(nb, buf)
	clear(nb[len(buf):])
	if cap(buf) == vfs.ChunkSize {
		//lint:ignore SA6002 a slice header is small; the buffer is what is pooled
		w.pool.Put(buf[:0])
	}
	return nb, int64(cap(nb) - cap(buf))
}

// throttle makes a writer wait while the buffer is over budget, after
// asking the background persister to make room.
func (w *writeback) throttle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.mem > w.budget && w.failed == nil {
		select {
		case w.kick <- struct{}{}:
		default:
		}
		w.cond.Wait()
	}
}

// read serves a read of a dirty inode; ok is false when ino is not dirty
// (the vault holds all of it).
func (w *writeback) read(ino vfs.Ino, dest []byte, off int64) (n int, ok bool, e syscall.Errno) {
	f := w.lookup(ino)
	if f == nil {
		return 0, false, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == stateFlushed {
		return 0, false, 0
	}
	if off < 0 {
		return 0, true, syscall.EINVAL
	}
	if uint64(off) >= f.size {
		return 0, true, 0
	}
	end := min(uint64(off)+uint64(len(dest)), f.size)
	dest = dest[:end-uint64(off)]
	// What the vault holds first, unless dirty chunks cover the range.
	covered := true
	for i := uint64(off) / vfs.ChunkSize; i*vfs.ChunkSize < end; i++ {
		if _, ok := f.chunks[i]; !ok {
			covered = false
			break
		}
	}
	if covered {
		clear(dest)
	} else {
		err := w.st.view(func(tx *vfs.Tx) error {
			got, err := tx.Read(ino, off, dest)
			clear(dest[got:])
			return err
		})
		if err != nil {
			return 0, true, w.st.errno("read", err)
		}
	}
	for i := uint64(off) / vfs.ChunkSize; i*vfs.ChunkSize < end; i++ {
		buf, ok := f.chunks[i]
		if !ok {
			continue
		}
		start := i * vfs.ChunkSize
		lo := max(start, uint64(off)) // file offsets
		hi := min(start+vfs.ChunkSize, end)
		d := dest[lo-uint64(off) : hi-uint64(off)]
		c := 0
		if lo-start < uint64(len(buf)) {
			c = copy(d, buf[lo-start:])
		}
		clear(d[c:])
	}
	return int(end - uint64(off)), true, 0
}
