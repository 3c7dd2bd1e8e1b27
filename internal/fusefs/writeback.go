package fusefs

import (
	"log"
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
	// ctime is the time of the last write: the file's ctime is never
	// shown or persisted earlier than it (show, vfs.Tx.WriteChunks), so
	// what the kernel was told stays true once the write is persisted.
	ctime time.Time

	// Guarded by writeback.mu, so the persister can pick files without
	// waiting for a batch that holds their locks.
	mem   int64     // capacity of the chunk buffers
	first time.Time // when it became dirty
	last  time.Time // last write
}

// writeback is the write-back cache of one mount.
type writeback struct {
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
	w := &writeback{st: st, logger: logger, budget: budget, idle: idleFlush,
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
		if _, derr := w.st.v.DeferSync(false); err == nil {
			err = derr
		}
	}
	return err
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

// show puts f's buffered size and times into a, attributes read from the
// vault: the size and mtime of the writes, and a ctime no earlier than
// the last write's. A persist stores the same (vfs.Tx.WriteChunks), so
// the attributes the kernel caches do not change when it happens. f.mu
// is held.
func (f *wfile) show(a *vfs.Attr) {
	a.Size = f.size
	if !f.mtime.IsZero() {
		a.Mtime = f.mtime
	}
	if f.ctime.After(a.Ctime) {
		a.Ctime = f.ctime
	}
}

// overlay puts a dirty inode's size and times into attributes read from
// the vault (show); it reports whether the inode had a record.
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
	f.show(a)
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
	for try := 0; ; try++ {
		gen := w.generation()
		a, e := read()
		if e != 0 || w.overlay(&a) || w.generation() == gen {
			return a, e
		}
		if try == 8 {
			// The generation counts persists of any inode: under a
			// storm of them, persist this one and read what the vault
			// then holds, rather than spin.
			if e := w.flush(a.Ino); e != 0 {
				return a, e
			}
			a, e = read()
			if e == 0 {
				w.overlay(&a)
			}
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
