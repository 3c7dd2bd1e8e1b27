// Package mem is the in-memory kv engine. It exists so tests above package kv
// run fast and hermetically with the same semantics as the file engines:
// ordered keys, snapshot reads, serialized writers, and writes that stay
// invisible until their transaction commits.
//
// The committed state is an immutable sorted slice. A View takes the current
// slice and so reads a snapshot without locking. An Update collects its
// writes in an overlay and, on commit, merges them into a new slice; that
// costs O(n) per commit, which is fine at test sizes.
package mem

import (
	"bytes"
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Name is the engine's name as reported by Engine.Name.
const Name = "mem"

// errWriteInScan guards the documented rule that fn must not write during a
// Scan; the file engines enforce it too, so tests catch it on any engine.
var errWriteInScan = errors.New("kv/mem: Put or Delete during Scan")

type entry struct {
	k, v []byte
}

// state is one committed version of the store. It is never modified once
// published.
type state struct {
	entries []entry // sorted by key
}

// DB is an in-memory kv.Engine. The zero value is not usable; call New.
type DB struct {
	cur    atomic.Pointer[state]
	wmu    sync.Mutex // serializes Update
	closed atomic.Bool
}

var _ kv.Engine = (*DB)(nil)

// New returns an empty in-memory engine.
func New() *DB {
	db := &DB{}
	db.cur.Store(&state{})
	return db
}

// Name implements kv.Engine.
func (db *DB) Name() string { return Name }

// Capabilities implements kv.Capable: a memory store is its process's alone.
func (db *DB) Capabilities() kv.Capabilities { return kv.Capabilities{} }

// Path implements kv.Engine; memory engines have no file.
func (db *DB) Path() string { return "" }

// Close implements kv.Engine. The contents are dropped.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return kv.ErrClosed
	}
	return nil
}

// View implements kv.Engine.
func (db *DB) View(fn func(kv.Tx) error) error {
	if db.closed.Load() {
		return kv.ErrClosed
	}
	t := &tx{base: db.cur.Load()}
	defer func() { t.done = true }()
	return fn(t)
}

// Update implements kv.Engine.
func (db *DB) Update(fn func(kv.Tx) error) error {
	if db.closed.Load() {
		return kv.ErrClosed
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.closed.Load() {
		return kv.ErrClosed
	}
	t := &tx{base: db.cur.Load(), write: true, pending: map[string]*[]byte{}}
	// On panic or error the overlay is simply dropped: nothing to undo.
	defer func() { t.done = true }()
	if err := fn(t); err != nil {
		return err
	}
	t.done = true
	if len(t.pending) > 0 {
		db.cur.Store(t.commit())
	}
	return nil
}

type tx struct {
	base     *state
	write    bool
	done     bool
	scanning int
	// pending maps a key to its new value, or to nil for a deletion.
	pending map[string]*[]byte
}

func (t *tx) check(write bool) error {
	switch {
	case t.done:
		return kv.ErrClosed
	case write && !t.write:
		return kv.ErrReadOnly
	case write && t.scanning > 0:
		return errWriteInScan
	}
	return nil
}

// search returns the index of the first entry with key >= k.
func (s *state) search(k []byte) int {
	return sort.Search(len(s.entries), func(i int) bool {
		return bytes.Compare(s.entries[i].k, k) >= 0
	})
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	if p, ok := t.pending[string(key)]; ok {
		if p == nil {
			return nil, kv.ErrNotFound
		}
		return *p, nil
	}
	i := t.base.search(key)
	if i < len(t.base.entries) && bytes.Equal(t.base.entries[i].k, key) {
		return t.base.entries[i].v, nil
	}
	return nil, kv.ErrNotFound
}

func (t *tx) Put(key, value []byte) error {
	if err := t.check(true); err != nil {
		return err
	}
	if len(key) == 0 {
		return kv.ErrEmptyKey
	}
	// Copy: the caller may reuse its buffer as soon as Put returns. A
	// non-nil empty slice keeps Get's "empty, not missing" answer uniform.
	v := append(make([]byte, 0, len(value)), value...)
	t.pending[string(key)] = &v
	return nil
}

func (t *tx) Delete(key []byte) error {
	if err := t.check(true); err != nil {
		return err
	}
	t.pending[string(key)] = nil
	return nil
}

func (t *tx) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if err := t.check(false); err != nil {
		return err
	}
	t.scanning++
	defer func() { t.scanning-- }()

	inRange := func(k []byte) bool { return end == nil || bytes.Compare(k, end) < 0 }
	base := t.base.entries[t.base.search(start):]
	// The overlay keys in range, sorted, merged with the base below.
	var over []string
	for k := range t.pending {
		if bytes.Compare([]byte(k), start) >= 0 && inRange([]byte(k)) {
			over = append(over, k)
		}
	}
	slices.Sort(over)

	for {
		var k, v []byte
		switch {
		case len(base) > 0 && inRange(base[0].k) &&
			(len(over) == 0 || bytes.Compare(base[0].k, []byte(over[0])) < 0):
			k, v = base[0].k, base[0].v
			base = base[1:]
		case len(over) > 0:
			if len(base) > 0 && bytes.Equal(base[0].k, []byte(over[0])) {
				base = base[1:] // shadowed by the overlay
			}
			p := t.pending[over[0]]
			k = []byte(over[0])
			over = over[1:]
			if p == nil {
				continue
			}
			v = *p
		default:
			return nil
		}
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
}

// commit merges the overlay into a new sorted state.
func (t *tx) commit() *state {
	keys := make([]string, 0, len(t.pending))
	for k := range t.pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	old := t.base.entries
	out := make([]entry, 0, len(old)+len(keys))
	for _, k := range keys {
		i := sort.Search(len(old), func(i int) bool { return string(old[i].k) >= k })
		out = append(out, old[:i]...)
		old = old[i:]
		if len(old) > 0 && string(old[0].k) == k {
			old = old[1:]
		}
		if p := t.pending[k]; p != nil {
			out = append(out, entry{k: []byte(k), v: *p})
		}
	}
	out = append(out, old...)
	return &state{entries: out}
}
