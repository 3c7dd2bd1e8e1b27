// Package bolt is the kv engine on go.etcd.io/bbolt: a copy-on-write
// B+tree in one memory-mapped file, with every pair in a single bucket.
//
// A bolt vault is used by one process at a time: bbolt holds an exclusive
// flock on the file while it is open. A second process's Open waits for
// the options' Timeout, then fails with an error wrapping kv.ErrBusy. Within
// a process, open each file once (package engines shares one handle).
//
// bbolt trusts its file: a damaged page can make it panic, or fault on the
// memory map. Open checks the meta pages and the file's size before
// handing the file to bbolt, and every bbolt call runs with faults turned
// into panics and panics turned into errors wrapping kv.ErrCorrupt, so a bad
// vault never takes the process down.
//
// Read transactions hold bbolt's mmap lock, and a commit that must grow
// the map waits for them to end. So, as with bbolt itself, a goroutine must
// not wait for an Update while it is inside a View. The map starts at
// initialMmapSize, so vaults smaller than that never remap at all.
package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/internal/fsutil"
)

// Name is the engine's registered name.
const Name = "bolt"

// Caps are the engine's capabilities: the file is locked to the process
// that opened it, and there are no side files.
var Caps = kv.Capabilities{}

// Capabilities implements kv.Capable.
func (db *DB) Capabilities() kv.Capabilities { return Caps }

// DefaultTimeout bounds the wait for another process's lock on the file.
const DefaultTimeout = 5 * time.Second

// initialMmapSize is address space, not memory. bbolt also grows the file
// to the map's size (sparsely), so this stays small.
const initialMmapSize = 1 << 20

// bucket holds every pair. A bbolt file without it belongs to some other
// program.
var bucket = []byte("avfs.kv")

var (
	errWriteInScan = errors.New("kv/bolt: Put or Delete during Scan")
	errTxDone      = fmt.Errorf("kv/bolt: transaction already ended: %w", kv.ErrClosed)
	emptyValue     = []byte{}
)

// Options tune an engine; the zero value (or nil) means the defaults.
type Options struct {
	// Timeout bounds the wait for the file lock (DefaultTimeout when zero).
	Timeout time.Duration
}

// DB is a bbolt-backed kv.Engine. It is safe for concurrent use.
type DB struct {
	db   *bbolt.DB
	path string
	opts *Options
	// wmu is held by write transactions and by Rewrite, which copies db
	// into a new file and replaces it (under mu): readers go on on the
	// old one meanwhile, and it closes once they ended.
	wmu sync.Mutex

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup // Views and Updates in progress
}

var _ kv.Engine = (*DB)(nil)

// Create makes a new, empty vault at path (mode 0600). It fails with an
// error wrapping os.ErrExist when path exists.
func Create(path string, opts *Options) (*DB, error) {
	path, err := fsutil.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := fsutil.CreateNew(path); err != nil {
		return nil, err
	}
	db, err := openBolt(path, opts)
	if err == nil {
		err = db.guard(func() error {
			return db.db.Update(func(tx *bbolt.Tx) error {
				_, err := tx.CreateBucket(bucket)
				return err
			})
		})
		if err == nil {
			err = fsutil.SyncDir(path)
		}
		if err != nil {
			db.db.Close()
		}
	}
	if err != nil {
		os.Remove(path)
		return nil, wrapErr(path, "create", err)
	}
	return db, nil
}

// Open opens an existing vault. A file that is not a bbolt database, or
// one without the avfs bucket, gives an error wrapping kv.ErrForeign; a
// damaged one kv.ErrCorrupt; a file locked by another process for longer
// than the timeout kv.ErrBusy.
func Open(path string, opts *Options) (*DB, error) {
	path, err := fsutil.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	err = Detect(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	db, err := openBolt(path, opts)
	if err != nil {
		return nil, wrapErr(path, "open", err)
	}
	err = db.guard(func() error {
		return db.db.View(func(tx *bbolt.Tx) error {
			if tx.Bucket(bucket) == nil {
				return fmt.Errorf("%w: bbolt database without the %q bucket", kv.ErrForeign, bucket)
			}
			return nil
		})
	})
	if err != nil {
		db.db.Close()
		return nil, wrapErr(path, "open", err)
	}
	return db, nil
}

func boltOptions(opts *Options) *bbolt.Options {
	o := &bbolt.Options{
		Timeout:         DefaultTimeout,
		FreelistType:    bbolt.FreelistMapType,
		InitialMmapSize: initialMmapSize,
	}
	if opts != nil && opts.Timeout > 0 {
		o.Timeout = opts.Timeout
	}
	return o
}

// openBolt opens path with bbolt. A Rewrite in another process renames a
// new file over the path while it holds both files' locks, and releases
// the old one after: an open that waited for that lock would get the old,
// unlinked file. So an open after which the path names another file than
// before it starts over.
func openBolt(path string, opts *Options) (*DB, error) {
	for attempt := 0; ; attempt++ {
		before, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		d := &DB{path: path, opts: opts}
		err = d.guard(func() (err error) {
			d.db, err = bbolt.Open(path, fsutil.FileMode, boltOptions(opts))
			return err
		})
		if err != nil {
			return nil, err
		}
		after, err := os.Stat(path)
		if err == nil && (os.SameFile(before, after) || attempt >= 2) {
			return d, nil
		}
		d.db.Close()
		if err != nil {
			return nil, err
		}
	}
}

// guard runs a bbolt call with memory faults turned into panics and panics
// into kv.ErrCorrupt.
func (d *DB) guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt: %v", kv.ErrCorrupt, r)
		}
	}()
	return f()
}

// bolt is the file's current bbolt handle.
func (d *DB) bolt() *bbolt.DB {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.db
}

// Name implements kv.Engine.
func (d *DB) Name() string { return Name }

// Path implements kv.Engine.
func (d *DB) Path() string { return d.path }

func (d *DB) enter() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return kv.ErrClosed
	}
	d.running.Add(1)
	return nil
}

// Close waits for running transactions, then closes the file and releases
// its lock.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return kv.ErrClosed
	}
	d.closed = true
	d.mu.Unlock()
	d.running.Wait()
	return wrapErr(d.path, "close", d.bolt().Close())
}

// View implements kv.Engine.
func (d *DB) View(fn func(kv.Tx) error) error {
	return d.run(false, fn)
}

// Update implements kv.Engine.
func (d *DB) Update(fn func(kv.Tx) error) error {
	return d.run(true, fn)
}

func (d *DB) run(write bool, fn func(kv.Tx) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.running.Done()
	if write {
		d.wmu.Lock()
		defer d.wmu.Unlock()
	}
	db := d.bolt()
	// Faults in the map become panics for the whole transaction, which the
	// tx methods then turn into errors (goroutine-local, restored after).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	var btx *bbolt.Tx
	err := d.guard(func() (err error) {
		btx, err = db.Begin(write)
		return err
	})
	if err != nil {
		return wrapErr(d.path, "begin", err)
	}
	t := &tx{db: d, write: write, b: btx.Bucket(bucket)}
	done := false
	defer func() {
		t.done = true
		if !done {
			// fn failed or panicked: drop the transaction. For a View
			// this is the normal end.
			_ = d.guard(btx.Rollback)
		}
	}()
	if t.b == nil {
		return fmt.Errorf("%w: bucket %q vanished", kv.ErrCorrupt, bucket)
	}
	if err := fn(t); err != nil {
		return err
	}
	if !write {
		return nil
	}
	t.done, done = true, true
	return wrapErr(d.path, "commit", d.guard(btx.Commit))
}

// tx implements kv.Tx on a bbolt transaction.
type tx struct {
	db       *DB
	b        *bbolt.Bucket
	write    bool
	done     bool
	scanning int
	inFn     bool // inside Scan's callback: its panics are not ours to catch
}

// enter marks the start of a tx method: from here until Scan calls back
// into fn, a panic comes from bbolt. It returns the previous mark, which
// the deferred recoverCorrupt restores.
func (t *tx) enter() (prevInFn bool) {
	prevInFn, t.inFn = t.inFn, false
	return prevInFn
}

// recoverCorrupt, deferred by each method, turns a bbolt panic into
// kv.ErrCorrupt and lets a panic from Scan's fn through untouched.
func (t *tx) recoverCorrupt(op string, err *error, prevInFn bool) {
	inFn := t.inFn
	t.inFn = prevInFn
	if inFn {
		return
	}
	if r := recover(); r != nil {
		*err = wrapErr(t.db.path, op, fmt.Errorf("%w: bbolt: %v", kv.ErrCorrupt, r))
	}
}

func (t *tx) checkWrite() error {
	switch {
	case t.done:
		return errTxDone
	case !t.write:
		return kv.ErrReadOnly
	case t.scanning > 0:
		return errWriteInScan
	}
	return nil
}

func (t *tx) Get(key []byte) (v []byte, err error) {
	if t.done {
		return nil, errTxDone
	}
	defer t.recoverCorrupt("get", &err, t.enter())
	// A cursor rather than Bucket.Get, which answers nil both for a missing
	// key and (in some states) for an empty value.
	k, v := t.b.Cursor().Seek(key)
	if k == nil || !bytes.Equal(k, key) {
		return nil, kv.ErrNotFound
	}
	if v == nil {
		v = emptyValue
	}
	return v, nil
}

func (t *tx) Put(key, value []byte) (err error) {
	if err := t.checkWrite(); err != nil {
		return err
	}
	if len(key) == 0 {
		return kv.ErrEmptyKey
	}
	defer t.recoverCorrupt("put", &err, t.enter())
	// bbolt keeps the value slice until commit; the caller may not.
	v := make([]byte, len(value))
	copy(v, value)
	return wrapErr(t.db.path, "put", t.b.Put(key, v))
}

func (t *tx) Delete(key []byte) (err error) {
	if err := t.checkWrite(); err != nil {
		return err
	}
	if len(key) == 0 {
		return nil // bbolt would say ErrKeyRequired; no such key can exist
	}
	defer t.recoverCorrupt("delete", &err, t.enter())
	return wrapErr(t.db.path, "delete", t.b.Delete(key))
}

func (t *tx) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) (err error) {
	if t.done {
		return errTxDone
	}
	defer t.recoverCorrupt("scan", &err, t.enter())
	t.scanning++
	defer func() { t.scanning-- }()
	c := t.b.Cursor()
	for k, v := c.Seek(start); k != nil; k, v = c.Next() {
		if end != nil && bytes.Compare(k, end) >= 0 {
			return nil
		}
		if v == nil {
			v = emptyValue
		}
		t.inFn = true
		more, err := fn(k, v)
		t.inFn = false
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// wrapErr adds the path and operation, and maps bbolt's errors to the kv
// sentinels: a lock timeout is kv.ErrBusy, a bad file kv.ErrCorrupt.
func wrapErr(path, op string, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		kind = kv.ErrBusy
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		kind = kv.ErrCorrupt
	case errors.Is(err, berrors.ErrDatabaseNotOpen), errors.Is(err, berrors.ErrTxClosed):
		kind = kv.ErrClosed
	}
	if kind != nil && !errors.Is(err, kind) {
		return fmt.Errorf("bolt %s: %s: %w: %w", path, op, kind, err)
	}
	return fmt.Errorf("bolt %s: %s: %w", path, op, err)
}
