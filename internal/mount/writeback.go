package mount

import (
	"log"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The write-back cache. The kernel is told to skip OPEN, FLUSH and RELEASE
// (node_file_ops.go), so there is no open file to hang state on: it is kept
// per inode. An inode the mount writes goes through
//
//	open → dirty → persisting → flushed
//
// open: the kernel knows it, nothing is buffered (no record at all);
// dirty: written chunks are held in memory, whole chunks of ChunkSize at
// most, never the whole file; persisting: a batch transaction is writing
// them to the vault (writes, reads and getattr of the inode wait for it);
// flushed: the vault holds everything written, the record is dropped and
// the inode is back to open.
//
// Dirty data is persisted in batches, many inodes and chunks in one
// transaction: in the background once an inode has been idle for
// idleFlush, at once when the buffered bytes pass the budget (oldest dirty
// inodes first, writers waiting until they fit again), before an operation
// that needs the vault to hold the inode (setattr, fallocate, O_TRUNC),
// on fsync, and at unmount.
//
// Durability. With an engine that can defer syncs (SQLite: commits with
// synchronous=NORMAL, kv.Syncer) a batch commit survives a crash of the
// mount process but not of the machine. fsync(2) on any file or directory
// of the mount persists that inode and then syncs the vault's log: once it
// returns, everything the mount committed before it — that file's data,
// and every create, rename and earlier batch — survives a power cut. Data
// not yet persisted (at most the budget, for at most idleFlush after the
// last write) is lost if the mount process dies. An engine that cannot
// defer (bolt) syncs every batch; fsync then only persists the inode.
//
// Quotas are checked when a write is accepted, not when it is persisted:
// growth accepted but not yet persisted is reserved against max_size_mb,
// so a batch never fails a quota and the vault ends up holding exactly the
// writes that succeeded.

// Defaults of the write-back cache.
const (
	defaultBudget = 64 << 20
	idleFlush     = time.Second
)

// fileState is where an inode is in the write-back cycle.
type fileState int

const (
	stateOpen fileState = iota
	stateDirty
	statePersisting
	stateFlushed
)

func (s fileState) String() string {
	return [...]string{"open", "dirty", "persisting", "flushed"}[s]
}

// wfile is the buffered state of one inode.
type wfile struct {
	ino vfs.Ino

	mu     sync.Mutex // held by writes, dirty reads and the batch that persists it
	state  fileState
	base   uint64 // size in the vault
	size   uint64 // size with the buffered writes
	mtime  time.Time
	chunks map[uint64][]byte // chunk index → content from the chunk's start

	// Guarded by writeback.mu, so the persister can pick files without
	// waiting for a batch that holds their locks.
	mem   int64     // capacity of the chunk buffers
	first time.Time // when it became dirty
	last  time.Time // last write
}

// writeback is the write-back cache of one mount.
type writeback struct {
	v      *vfs.Vault
	st     *store
	logger *log.Logger
	budget int64
	idle   time.Duration
	quota  vfs.Quota
	// deferred is true when batch commits are not synced (kv.Syncer).
	deferred bool

	mu       sync.Mutex
	cond     *sync.Cond // broadcast when mem drops
	files    map[vfs.Ino]*wfile
	mem      int64  // bytes buffered
	reserved int64  // growth accepted, not yet persisted
	gen      uint64 // bumped whenever the vault's size of an inode may have changed
	failed   error  // the last batch's failure, until one succeeds

	persistMu sync.Mutex // one batch at a time
	// quotaMu makes "usage + reserved" exact: held to check and reserve,
	// and by a batch across its commit and the release of its reservation.
	quotaMu sync.Mutex

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	pool sync.Pool // full-size chunk buffers
}

func newWriteback(st *store, logger *log.Logger, budget int64) (*writeback, error) {
	v := st.v
	w := &writeback{v: v, st: st, logger: logger, budget: budget, idle: idleFlush,
		files: map[vfs.Ino]*wfile{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	w.pool.New = func() any { return make([]byte, 0, vfs.ChunkSize) }
	if err := v.View(func(tx *vfs.Tx) (err error) {
		w.quota, err = tx.Quota()
		return err
	}); err != nil {
		return nil, err
	}
	deferred, err := v.DeferSync(true)
	if err != nil {
		return nil, err
	}
	w.deferred = deferred
	go w.run()
	return w, nil
}

// close stops the background persister, persists everything and syncs:
// after it, the vault holds every write the mount accepted, durably.
func (w *writeback) close() error {
	close(w.stop)
	<-w.done
	err := w.persistAll()
	if serr := w.st.sync(); err == nil {
		err = serr
	}
	if w.deferred {
		if _, derr := w.v.DeferSync(false); err == nil {
			err = derr
		}
	}
	return err
}

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
			err := tx.WriteChunks(f.ino, f.size, f.mtime, chunks)
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

// lookup returns the record of a dirty or persisting inode, or nil.
func (w *writeback) lookup(ino vfs.Ino) *wfile {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files[ino]
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

// changed notes that the vault's size of some inode changed outside a
// batch (setattr, fallocate), so a record built from an older read is
// rebuilt.
func (w *writeback) changed() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.gen++
	w.mu.Unlock()
}

// withRecord runs fn with ino's record locked, or with nil when ino has
// nothing buffered; a batch cannot persist the record meanwhile.
func (w *writeback) withRecord(ino vfs.Ino, fn func(f *wfile)) {
	f := w.lookup(ino)
	if f == nil {
		fn(nil)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == stateFlushed {
		f = nil
	}
	fn(f)
}

// drop forgets the buffered data of an inode the vault no longer holds.
func (w *writeback) drop(ino vfs.Ino) {
	f := w.lookup(ino)
	if f == nil {
		return
	}
	f.mu.Lock()
	w.mu.Lock()
	if f.state == stateDirty {
		w.detach(f)
		w.cond.Broadcast()
	}
	w.mu.Unlock()
	f.mu.Unlock()
}

// file returns ino's record, creating it from the vault's attributes, and
// locked. It fails for an inode that is not a regular file.
func (w *writeback) file(ino vfs.Ino) (*wfile, syscall.Errno) {
	for {
		w.mu.Lock()
		f := w.files[ino]
		gen := w.gen
		w.mu.Unlock()
		if f == nil {
			var a vfs.Attr
			err := w.st.view(func(tx *vfs.Tx) (err error) {
				a, err = tx.GetAttr(ino)
				return err
			})
			if err != nil {
				return nil, errs.Errno(err)
			}
			switch a.Type {
			case vfs.TypeFile:
			case vfs.TypeDir:
				return nil, syscall.EISDIR
			default:
				return nil, syscall.EINVAL
			}
			w.mu.Lock()
			if w.gen != gen || w.files[ino] != nil {
				w.mu.Unlock()
				continue // the vault changed under the read: read again
			}
			f = &wfile{ino: ino, state: stateDirty, base: a.Size, size: a.Size,
				chunks: map[uint64][]byte{}, first: time.Now(), last: time.Now()}
			w.files[ino] = f
			w.mu.Unlock()
		}
		f.mu.Lock()
		if f.state == stateFlushed {
			f.mu.Unlock() // persisted while we waited: start a new record
			continue
		}
		return f, 0
	}
}

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
				return 0, errs.Errno(err)
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
			return 0, true, errs.Errno(err)
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

// overlay puts a dirty inode's size and mtime into attributes read from
// the vault; it reports whether the inode had a record.
func (w *writeback) overlay(a *vfs.Attr) bool {
	f := w.lookup(a.Ino)
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == stateFlushed {
		return false
	}
	a.Size = f.size
	if !f.mtime.IsZero() {
		a.Mtime, a.Ctime = f.mtime, f.mtime
	}
	return true
}

// generation is bumped whenever the vault's size of an inode may have
// changed under a reader (a persist, a truncate).
func (w *writeback) generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// attrs reads attributes with read and overlays the buffered size and
// mtime. A persist that completes between the read and the overlay would
// leave the read's older size with no record left to correct it — and the
// kernel caches what it is told (an append would then land at the old
// end): so then it reads again.
func (w *writeback) attrs(read func() (vfs.Attr, syscall.Errno)) (vfs.Attr, syscall.Errno) {
	if w == nil {
		return read()
	}
	for {
		gen := w.generation()
		a, e := read()
		if e != 0 || w.overlay(&a) || w.generation() == gen {
			return a, e
		}
	}
}

// pending is the bytes accepted but not yet in the vault's usage.
func (w *writeback) pending() int64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reserved
}
