package vfs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// Tx is one transaction on a vault's filesystem: every operation inside
// one Update commits together or not at all. A Tx from View (or ViewAt)
// is read-only and its writes fail with EROFS.
type Tx struct {
	v     *Vault
	c     *chain
	txs   []kv.Tx // one per chain segment; txs[0] is the vault's own file
	top   uint64  // writable layer; 0 in a read-only transaction
	now   time.Time
	usage *layerRecord // the top layer's record, loaded on first change
	quota *Quota
	dirty bool   // usage changed
	ino   uint64 // the next inode number, once one was allocated
	batch *Batch // the batch this transaction is a step or a read of
	rc    txCache
	// missed: a cache-only transaction needed the engine (cache.go).
	missed bool
	// written lists the vkeys whose new versions went to the read cache.
	written [][]byte
	// putInodes holds the records putInode wrote in this transaction's
	// top layer (inode.go).
	putInodes map[Ino][]byte
}

// txCache is a transaction's use of its vault's read cache (cache.go).
type txCache struct {
	c      *readCache // nil: not cached
	gen    uint64     // the generation it began at
	latest bool       // it reads the latest state, not only the last commit
}

// View runs fn on the working state in a read-only transaction.
func (v *Vault) View(fn func(*Tx) error) error {
	return v.run(false, nil, fn)
}

// Update runs fn on the working state in a write transaction: on error
// nothing of it is kept.
func (v *Vault) Update(fn func(*Tx) error) error {
	return v.run(true, nil, fn)
}

// ViewAt runs fn read-only on a saved state: the named checkpoint.
func (v *Vault) ViewAt(checkpoint string, fn func(*Tx) error) error {
	return v.run(false, &checkpoint, fn)
}

// ViewAfter runs fn read-only on the state just after the named
// checkpoint: the layer the checkpoint's save started, sealed (Seal) or
// frozen since, or still the working state. A proxy run saves its
// checkpoint, writes only into that layer and seals it, so this is
// exactly the state the run left; compaction keeps that layer apart.
func (v *Vault) ViewAfter(checkpoint string, fn func(*Tx) error) error {
	return v.runSpec(txSpec{checkpoint: &checkpoint, after: true}, fn)
}

func (v *Vault) run(write bool, checkpoint *string, fn func(*Tx) error) error {
	return v.runSpec(txSpec{write: write, latest: write, checkpoint: checkpoint}, fn)
}

func (v *Vault) runSpec(spec txSpec, fn func(*Tx) error) error {
	write := spec.write
	body := v.body(spec, fn)
	var err error
	if write {
		if err := v.checkGuard(); err != nil {
			return err
		}
		err = v.eng.Update(body)
		if v.cache != nil {
			v.cache.settled(err == nil)
		}
	} else {
		err = v.eng.View(body)
	}
	if err != nil {
		return storageErr("", v.Name(), err)
	}
	return nil
}

// txSpec says what a transaction reads and whether it writes.
type txSpec struct {
	write bool
	// latest: it reads the latest state (a write, or a read through a
	// batch), not only the last commit.
	latest     bool
	checkpoint *string // a saved state instead of the working state
	after      bool    // the state just after checkpoint (ViewAfter)
	layer      uint64  // a frozen layer's state instead (a merge base); 0: none
	// batch, when set, is the batch the transaction is a step or a read
	// of. It keeps the chain across its steps (it holds the write lock,
	// so only its own steps could change the layer graph, and none does)
	// and learns each step's transaction, to forget what a failed one
	// wrote.
	batch *Batch
}

// body is what a transaction runs on its own file: it finds the chain of
// layers of the state (the working state, or the checkpoint's), binds the
// chain's parent files and runs fn.
func (v *Vault) body(spec txSpec, fn func(*Tx) error) func(kv.Tx) error {
	rc := txCache{latest: spec.latest}
	if v.cache != nil && spec.checkpoint == nil && spec.layer == 0 {
		rc.c = v.cache
		rc.gen, _ = v.cache.begin()
	}
	return func(kt kv.Tx) error {
		var c *chain
		var err error
		switch {
		case spec.layer != 0:
			c, err = v.chainAt(kt, spec.layer)
		case spec.checkpoint != nil:
			var cp Checkpoint
			if cp, err = getCheckpoint(kt, *spec.checkpoint); err == nil {
				layer := cp.Layer
				if spec.after {
					layer, err = layerAfter(kt, cp)
				}
				if err == nil {
					c, err = v.chainAt(kt, layer)
				}
			}
		case spec.batch != nil && spec.batch.chain != nil:
			c = spec.batch.chain
		default:
			c, err = v.currentChain(kt)
			if spec.batch != nil {
				spec.batch.chain = c
			}
		}
		if err != nil {
			return err
		}
		if rc.c != nil {
			rc.c.bind(c.topo)
		}
		t := &Tx{v: v, c: c, now: v.now(), rc: rc}
		if spec.write {
			t.top = c.top
		}
		if spec.batch != nil {
			spec.batch.step = t
			t.batch = spec.batch
		}
		return t.bind(kt, func() error {
			if err := fn(t); err != nil {
				return err
			}
			return t.flushCounters()
		})
	}
}

// bind opens read transactions on the parent files of the chain, then runs fn.
func (t *Tx) bind(own kv.Tx, fn func() error) error {
	t.txs = append(make([]kv.Tx, 0, len(t.c.segs)), own)
	var open func(i int) error
	open = func(i int) error {
		if i == len(t.c.segs) {
			return fn()
		}
		return t.c.segs[i].v.eng.View(func(kt kv.Tx) error {
			t.txs = append(t.txs, kt)
			return open(i + 1)
		})
	}
	return open(1)
}

func (t *Tx) own() kv.Tx { return t.txs[0] }

func (t *Tx) writable(op string) error {
	if t.top == 0 {
		return errs.E(op, "", syscall.EROFS)
	}
	return nil
}

// Now is the time stamped on changes made in this transaction.
func (t *Tx) Now() time.Time { return t.now }

// version is what a lookup found of a record: its value (nil when it is
// absent or deleted), and the segment and layer holding that version
// (layer 0: there is no version at all).
type version struct {
	val   []byte
	seg   int
	layer uint64
	ok    bool
}

// get returns the version of vkey visible in this state and the index of
// the segment holding it; ok is false when it is absent or deleted.
func (t *Tx) get(vkey []byte) (val []byte, segIdx int, ok bool, err error) {
	rc := t.rc
	if rc.c == nil {
		v, err := t.getFrom(vkey, 0, 0)
		return v.val, v.seg, v.ok, err
	}
	if e, hit := rc.c.get(vkey, rc.gen, rc.latest); hit {
		return bytes.Clone(e.val), e.seg, e.ok, nil
	}
	// Reads fill the cache; a change's own lookups (a streaming write's
	// chunk maps, say) would only push out what reads use.
	v, err := t.getFrom(vkey, 0, 0)
	if err == nil && t.top == 0 {
		rc.c.put(vkey, rc.gen, rc.latest, v)
	}
	return v.val, v.seg, v.ok, err
}

// getFrom looks vkey up starting at segment from, skipping the version of
// layer skip in the first segment (0 skips nothing).
func (t *Tx) getFrom(vkey []byte, from int, skip uint64) (version, error) {
	end := kv.PrefixEnd(vkey)
	for i := from; i < len(t.c.segs); i++ {
		layers := t.c.segs[i].layers
		var found version
		err := t.txs[i].Scan(vkey, end, func(k, v []byte) (bool, error) {
			_, layer, _ := splitVersion(k)
			if !layers[layer] || (i == from && layer == skip) {
				return true, nil
			}
			found = version{seg: i, layer: layer, ok: len(v) > 0}
			if found.ok {
				found.val = bytes.Clone(v)
			}
			return false, nil
		})
		if err != nil {
			return version{}, err
		}
		if found.layer != 0 {
			return found, nil
		}
	}
	return version{}, nil
}

// put writes vkey's version in the top layer and journals it, unless the
// read cache knows the top layer holds a version already, and so its
// journal entry.
func (t *Tx) put(vkey, val []byte) error {
	journaled := t.inTop(vkey)
	if err := t.own().Put(versionKey(vkey, t.top), val); err != nil {
		return err
	}
	t.wrote(vkey, val, t.top, len(val) > 0)
	if journaled {
		return nil
	}
	return t.own().Put(journalKey(t.top, vkey), nil)
}

// inTop tells whether the read cache knows that vkey's visible version is
// in the top layer.
func (t *Tx) inTop(vkey []byte) bool {
	if t.rc.c == nil {
		return false
	}
	e, hit := t.rc.c.get(vkey, t.rc.gen, t.rc.latest)
	return hit && e.seg == 0 && e.layer == t.top
}

// created tells the read cache that this transaction made inode ino (see
// readCache.whole); a failed step forgets it with its writes.
func (t *Tx) created(ino Ino, dir bool) {
	if t.rc.c != nil {
		t.written = append(t.written, t.rc.c.created(ino, dir, &t.rc.gen)...)
	}
}

// wrote tells the read cache what a write made of vkey.
func (t *Tx) wrote(vkey, val []byte, layer uint64, present bool) {
	if t.rc.c != nil {
		t.rc.c.wrote(vkey, val, layer, present, &t.rc.gen)
		t.written = append(t.written, vkey)
	}
}

// del deletes vkey from the state: a whiteout when a lower layer still
// holds a version, otherwise the top layer's version simply goes.
func (t *Tx) del(vkey []byte) error {
	below, err := t.getFrom(vkey, 0, t.top)
	if err != nil {
		return err
	}
	if below.ok {
		return t.put(vkey, nil)
	}
	if err := t.own().Delete(versionKey(vkey, t.top)); err != nil {
		return err
	}
	t.wrote(vkey, nil, 0, false)
	return t.own().Delete(journalKey(t.top, vkey))
}

// Quota limits a vault. Zero means unlimited.
type Quota struct {
	MaxSizeMB     int64 `json:"max_size_mb"`
	MaxFiles      int64 `json:"max_files"`
	MaxFileSizeMB int64 `json:"max_file_size_mb"`
}

// MaxQuotaMB is the largest size limit a quota can hold, in MiB: its
// bytes still fit an int64, so comparing usage with it cannot overflow.
const MaxQuotaMB = math.MaxInt64 >> 20

// Check refuses a quota no vault can hold: a negative limit, or a size
// limit whose bytes overflow (it would have refused every write).
func (q Quota) Check() error {
	if q.MaxSizeMB < 0 || q.MaxFiles < 0 || q.MaxFileSizeMB < 0 {
		return errs.New(errs.InvalidInput, "quota set", "quota values must be zero (unlimited) or positive")
	}
	if q.MaxSizeMB > MaxQuotaMB || q.MaxFileSizeMB > MaxQuotaMB {
		return errs.New(errs.InvalidInput, "quota set", "size quotas must be at most %d MiB", int64(MaxQuotaMB))
	}
	return nil
}

// Usage is what a state holds, as counted against the quota.
type Usage struct {
	Bytes int64 `json:"bytes"` // regular file sizes, and extended attributes' names and values
	Files int64 `json:"files"` // inodes other than the root
}

func (t *Tx) loadQuota() (*Quota, error) {
	if t.quota == nil {
		b, err := t.own().Get(metaKey(metaQuota))
		if err != nil {
			return nil, corruptf("quota record: %v", err)
		}
		var q Quota
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, corruptf("quota record: %v", err)
		}
		t.quota = &q
	}
	return t.quota, nil
}

// Usage returns the state's counters.
func (t *Tx) Usage() (Usage, error) {
	l, err := t.loadUsage()
	if err != nil {
		return Usage{}, err
	}
	return Usage{Bytes: l.Bytes, Files: l.Files}, nil
}

// Quota returns the vault's limits.
func (t *Tx) Quota() (Quota, error) {
	q, err := t.loadQuota()
	if err != nil {
		return Quota{}, err
	}
	return *q, nil
}

// charge applies a change of usage, refusing it when it would pass a limit.
// Shrinking is always allowed, even over a limit lowered after the fact.
func (t *Tx) charge(op, path string, dBytes, dFiles int64) error {
	return t.chargeCredit(op, path, dBytes, dFiles, credit{})
}

// credit is usage that is counted but not held against the limits: what
// a staged write (stage.go) will free when it is put in place.
type credit struct{ bytes, files int64 }

// chargeCredit is charge with usage c not held against the limits.
func (t *Tx) chargeCredit(op, path string, dBytes, dFiles int64, c credit) error {
	l, err := t.loadUsage()
	if err != nil {
		return err
	}
	q, err := t.loadQuota()
	if err != nil {
		return err
	}
	if dBytes > 0 && q.MaxSizeMB > 0 && l.Bytes-c.bytes+dBytes > q.MaxSizeMB<<20 {
		return quotaErr(op, path, "max_size_mb", q.MaxSizeMB, syscall.ENOSPC)
	}
	if dFiles > 0 && q.MaxFiles > 0 && l.Files-c.files+dFiles > q.MaxFiles {
		return quotaErr(op, path, "max_files", q.MaxFiles, syscall.EDQUOT)
	}
	l.Bytes += dBytes
	l.Files += dFiles
	t.dirty = true
	return nil
}

func (t *Tx) checkFileSize(op, path string, size uint64) error {
	q, err := t.loadQuota()
	if err != nil {
		return err
	}
	if q.MaxFileSizeMB > 0 && size > uint64(q.MaxFileSizeMB)<<20 {
		return quotaErr(op, path, "max_file_size_mb", q.MaxFileSizeMB, syscall.EFBIG)
	}
	return nil
}

func quotaErr(op, path, key string, limit int64, errno syscall.Errno) error {
	return &errs.Error{Kind: errs.QuotaExceeded, Op: op, Path: path, Errno: errno,
		Err:   fmt.Errorf("quota %s=%d exceeded", key, limit),
		Hint:  "raise it with `avfs quota set " + key + " N` or free space",
		Extra: map[string]any{"quota": key, "limit": limit}}
}

// SetQuota replaces the vault's limits. Lowering a limit below the current
// usage is allowed: further growth fails, shrinking works.
func (t *Tx) SetQuota(q Quota) error {
	if err := t.writable("quota set"); err != nil {
		return err
	}
	if err := q.Check(); err != nil {
		return err
	}
	b, _ := json.Marshal(q)
	t.quota = &q
	return t.own().Put(metaKey(metaQuota), b)
}
