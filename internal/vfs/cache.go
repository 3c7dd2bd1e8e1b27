package vfs

import (
	"bytes"
	"errors"
	"sync"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// A read cache remembers the versions of records in the working state,
// as reads found them and writes left them, so a vault whose every change
// goes through one Vault value (a mount's server, the vault's only
// writer) answers repeated lookups of inodes, names, xattrs and chunk maps
// from memory instead of from a B-tree scan per segment. CacheReads turns it on; it is off otherwise,
// because other processes may change a vault under a Vault value.
//
// It stays exact by these rules:
//   - every write of a version (Tx.put, Tx.del) stores the new version,
//     for readers of the latest state, and bumps a generation; a
//     transaction uses the cache only while the generation is the one it
//     started with (or moved on by its own writes), so it never stores
//     what it read from before a change it cannot see;
//   - a batch step that fails drops what it wrote;
//   - a transaction that reads the last commit rather than the latest
//     state (a read connection beside an open batch) leaves the cache alone
//     while changes are uncommitted;
//   - a batch or update that ends without committing drops everything,
//     and a change of the layer graph (a checkpoint, a compaction in
//     another process) empties it when the next transaction sees it.
type readCache struct {
	mu    sync.Mutex
	topo  uint64 // the layer graph the entries belong to
	gen   uint64 // bumped by every write
	dirty bool   // written since the last commit or rollback
	m     map[string]version
	// whole holds the names prefixes of a directory ("D" ino) or the
	// xattr prefixes of an inode ("X" ino) whose every record is in m: the
	// prefixes of directories and inodes this Vault created, which had
	// none. A lookup there that m lacks finds nothing, without a scan:
	// what the kernel asks before it creates a file (a LOOKUP of the new
	// name, a GETXATTR of security.capability before the first write).
	whole map[string]bool
}

// wholePrefix is the prefix of vkey that whole may hold, or nil.
func wholePrefix(vkey []byte) []byte {
	if len(vkey) < 9 || vkey[0] != prefixDentry && vkey[0] != prefixXattr {
		return nil
	}
	return vkey[:9]
}

// maxCached bounds the entries (inode and name records are about 100
// bytes; 16,384 of them cost about 3 MiB). A mount of a larger tree
// starts over whenever the cache fills up.
const maxCached = 1 << 14

// CacheReads makes this Vault remember what its transactions read of the
// working state (see readCache). Turn it on only where this Vault value
// makes every change to the vault (the mount's server holds the writer
// lock), before it is shared between goroutines.
func (v *Vault) CacheReads() {
	v.cache = &readCache{m: map[string]version{}, whole: map[string]bool{}}
}

// begin returns the generation a transaction starts at, and the layer
// graph of the entries; it is taken before the engine's transaction
// begins, so a commit in between shows.
func (c *readCache) begin() (gen, topo uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen, c.topo
}

// bind checks the cache against the transaction's layer graph: on a new
// graph it empties the cache, and the transaction, which began on the old
// generation, does not use it.
func (c *readCache) bind(topo uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo != topo {
		clear(c.m)
		clear(c.whole)
		c.topo = topo
		c.gen++
	}
}

// usable tells whether a transaction that started at gen, reading the
// latest state or only the last commit, may use the cache now.
func (c *readCache) usable(gen uint64, latest bool) bool {
	return c.gen == gen && (latest || !c.dirty)
}

func (c *readCache) get(vkey []byte, gen uint64, latest bool) (version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.usable(gen, latest) {
		return version{}, false
	}
	e, ok := c.m[string(vkey)]
	if !ok && c.whole[string(wholePrefix(vkey))] {
		return version{}, true // absent: every record under the prefix is in m
	}
	return e, ok
}

func (c *readCache) put(vkey []byte, gen uint64, latest bool, e version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.usable(gen, latest) {
		return
	}
	c.makeRoom()
	e.val = bytes.Clone(e.val)
	c.m[string(vkey)] = e
}

// makeRoom keeps the entries under maxCached: a full cache starts over,
// with a new map (one that entries keep leaving and joining grows in
// memory well past what it holds).
func (c *readCache) makeRoom() {
	if len(c.m) >= maxCached {
		c.m = make(map[string]version)
		clear(c.whole)
	}
}

// advance moves the generation on for a write. A writer that was current
// (*gen) stays current, so it goes on reading its own changes from the
// cache. c.mu is held.
func (c *readCache) advance(gen *uint64) {
	mine := *gen == c.gen
	c.gen++
	c.dirty = true
	if mine {
		*gen = c.gen
	}
}

// wrote records the version a write transaction just gave vkey in layer
// (absent unless present; layer 0 when no version is left), for the latest
// state's readers.
func (c *readCache) wrote(vkey, val []byte, layer uint64, present bool, gen *uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(gen)
	if vkey[0] == prefixFile {
		// A file's chunk map: a streaming write would fill the cache
		// with records that are seldom read back soon.
		delete(c.m, string(vkey))
		return
	}
	c.makeRoom()
	c.m[string(vkey)] = version{val: bytes.Clone(val), layer: layer, ok: present}
}

// created records that a write transaction made inode ino, a directory
// when dir: no name under it, and no xattr of it, exists beyond what
// later writes record. It returns the prefixes it now holds whole.
func (c *readCache) created(ino Ino, dir bool, gen *uint64) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(gen)
	prefixes := [][]byte{xattrInoPrefix(ino)}
	if dir {
		prefixes = append(prefixes, dentryDirPrefix(ino))
	}
	for _, p := range prefixes {
		c.whole[string(p)] = true
	}
	return prefixes
}

// forget drops the entries of keys whose version changed in a way the
// cache does not follow (a failed step's writes, versions dropped
// outright).
func (c *readCache) forget(vkeys ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range vkeys {
		delete(c.m, string(k))
		delete(c.whole, string(wholePrefix(k)))
	}
	c.gen++
	c.dirty = true
}

// settled is told that the changes made since the last call were
// committed (kept) or not.
func (c *readCache) settled(kept bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !kept {
		clear(c.m)
		clear(c.whole)
	}
	c.gen++
	c.dirty = false
}

// ViewCached runs fn read-only on the working state like View, but first
// on the read cache alone: when everything fn reads is cached, no engine
// transaction is begun. When fn reads something the cache lacks, its
// result is dropped and it runs again in View, so fn must have no effect
// beyond what it returns. Without CacheReads it is View.
func (v *Vault) ViewCached(fn func(*Tx) error) error {
	if t := v.cacheOnly(v.chainNow(), false); t != nil {
		if err := fn(t); !t.missed {
			return storageErr("", v.Name(), err)
		}
	}
	return v.View(fn)
}

// ViewCached is View on the batch's state through the read cache, as
// Vault.ViewCached.
func (b *Batch) ViewCached(fn func(*Tx) error) error {
	if t := b.v.cacheOnly(b.chain, true); t != nil {
		if err := fn(t); !t.missed {
			return storageErr("", b.v.Name(), err)
		}
	}
	return b.View(fn)
}

// chainNow is the chain of the working state last read, or nil.
func (v *Vault) chainNow() *chain {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cached
}

// cacheOnly returns a read-only transaction on chain c that reads the
// read cache and nothing else, or nil when there is no cache for c.
func (v *Vault) cacheOnly(c *chain, latest bool) *Tx {
	if v.cache == nil || c == nil {
		return nil
	}
	gen, topo := v.cache.begin()
	if topo != c.topo {
		return nil
	}
	t := &Tx{v: v, c: c, now: v.now(), rc: txCache{c: v.cache, gen: gen, latest: latest}}
	t.txs = make([]kv.Tx, len(c.segs))
	for i := range t.txs {
		t.txs[i] = missTx{t}
	}
	return t
}

// errNotCached is what a cache-only transaction's engine answers.
var errNotCached = errors.New("vfs: not in the read cache")

// missTx is the engine of a cache-only transaction: whatever it is asked
// marks the transaction as one to run again on the real engine.
type missTx struct{ t *Tx }

func (m missTx) Get([]byte) ([]byte, error) { m.t.missed = true; return nil, errNotCached }
func (m missTx) Put(_, _ []byte) error      { m.t.missed = true; return errNotCached }
func (m missTx) Delete([]byte) error        { m.t.missed = true; return errNotCached }
func (m missTx) Scan(_, _ []byte, _ func(k, v []byte) (bool, error)) error {
	m.t.missed = true
	return errNotCached
}
