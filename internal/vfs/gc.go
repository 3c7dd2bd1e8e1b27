package vfs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Garbage collection of chunks, in bounded steps.
//
// A chunk is live while some chunk map ("F" record) of this file names it,
// in any layer, reachable or not: compaction drops the records of layers
// nothing reaches, and the next collection their chunks. Chunk maps only
// name chunks of their own file (a fork copies a parent's chunk into its
// own file before it maps it: shareChunk), so what a collection frees in
// one file no other file's state reads; the chunks a fork reads from its
// parent are named by the parent's pinned layers, which stay.
//
// A collection marks without blocking anyone and sweeps a few hundred
// chunks per write transaction:
//
//  1. a write transaction stores a fresh token under the marker "M" "gc";
//  2. a read transaction, which a writer never waits for, lists the chunks
//     no chunk map names (keys from the key index, then the sizes of the
//     dead ones; no data read);
//  3. write transactions of at most sweepStep chunks each delete them,
//     each first checking that the marker still holds the token; the last
//     deletes the marker.
//
// A chunk the mark found dead can come back to life only by a write that
// stores the same bytes again and finds the chunk there (storeChunk):
// every other new chunk map copies a chunk map that already exists, whose
// chunk was live at the mark. Such a write deletes the marker, so the
// sweep stops at its next step, before it could delete the chunk, and
// the next collection starts over. A crash at any point leaves either a
// marker (harmless: the next collection replaces it) or nothing.

// sweepStep bounds the chunks one sweep transaction deletes, and so how
// long a writer may wait for one.
const sweepStep = 256

// GCStats says what garbage collection freed.
type GCStats struct {
	ChunksKept  int   `json:"chunks_kept"`
	ChunksFreed int   `json:"chunks_freed"`
	BytesFreed  int64 `json:"bytes_freed"`
	// BytesReclaimed is how much smaller the file became: freed room the
	// engine gave back to the host.
	BytesReclaimed int64 `json:"bytes_reclaimed"`
	// LongestStep is the longest any of its write transactions held the
	// write lock: the longest a writer beside it may have waited for it
	// (the mount logs it). A reclaim step and a rewrite count from the
	// request of the lock, so a wait for a writer counts too.
	LongestStep time.Duration `json:"-"`
	// LayersDropped counts the layers no state reached, which it
	// deleted. (Not in JSON: compact's output has its own
	// layers_dropped, beside these fields.)
	LayersDropped int `json:"-"`
}

// dropStep bounds the records one transaction of dropUnreachable deletes.
const dropStep = 1024

// dropUnreachable deletes the layers no named layer's state reads, each
// in steps of dropStep records (with their journal entries) and a last
// one that deletes the layer's record. No state reads such a layer, so
// one left half deleted by a crash is still consistent, and the next call
// finishes it.
func (v *Vault) dropUnreachable(st *GCStats) error {
	for {
		var layer uint64
		err := v.eng.View(func(kt kv.Tx) error {
			g, err := loadGraph(kt)
			if err != nil {
				return err
			}
			reach := g.reachable()
			for id := range g.layers {
				// Children first: a child's id is larger than its parent's.
				if !reach[id] && id > layer {
					layer = id
				}
			}
			return nil
		})
		if err != nil || layer == 0 {
			return err
		}
		for done := false; !done; {
			err := v.step(st, func(kt kv.Tx) error {
				prefix := u64([]byte{prefixJournal}, layer)
				var vkeys [][]byte
				err := kv.ScanKeys(kt, prefix, kv.PrefixEnd(prefix), func(k []byte) (bool, error) {
					vkeys = append(vkeys, slices.Clone(k[len(prefix):]))
					return len(vkeys) < dropStep, nil
				})
				if err != nil {
					return err
				}
				for _, vk := range vkeys {
					if err := kt.Delete(versionKey(vk, layer)); err != nil {
						return err
					}
					if err := kt.Delete(journalKey(layer, vk)); err != nil {
						return err
					}
				}
				done = len(vkeys) < dropStep
				if !done {
					return nil
				}
				if err := kt.Delete(layerKey(layer)); err != nil {
					return err
				}
				return bumpTopo(kt)
			})
			if err != nil {
				return err
			}
		}
		st.LayersDropped++
		v.layersFreed(layer)
	}
}

// step runs fn as one write transaction of a collection and keeps in
// LongestStep how long it held the write lock: from when fn starts,
// after any wait for the lock, to the end of the commit.
func (v *Vault) step(st *GCStats, fn func(kv.Tx) error) error {
	var start time.Time
	err := v.eng.Update(func(kt kv.Tx) error {
		start = time.Now()
		return fn(kt)
	})
	if !start.IsZero() {
		st.LongestStep = max(st.LongestStep, time.Since(start))
	}
	return err
}

func (s *GCStats) add(o GCStats) {
	s.ChunksFreed += o.ChunksFreed
	s.BytesFreed += o.BytesFreed
	s.BytesReclaimed += o.BytesReclaimed
	s.ChunksKept = o.ChunksKept
	s.LayersDropped += o.LayersDropped
	s.LongestStep = max(s.LongestStep, o.LongestStep)
}

// gcAfterMark, when set (tests), runs between the mark and the sweep.
var gcAfterMark func()

// errGCRaced stops a sweep whose marker a write removed.
var errGCRaced = errors.New("a write stored a chunk the collection found dead")

// noteChunkReuse is called by a write that maps a chunk it found stored:
// a collection between its mark and its sweep must not free it.
func noteChunkReuse(kt kv.Tx) error {
	have, err := kv.Has(kt, metaKey(metaGC))
	if err != nil || !have {
		return err
	}
	return kt.Delete(metaKey(metaGC))
}

type deadChunk struct {
	key  []byte
	size int
}

// collect runs one collection. raced reports that a write reused a
// chunk between the mark and the sweep: what was swept before stays
// freed, the rest waits for the next collection.
func (v *Vault) collect() (st GCStats, raced bool, err error) {
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	err = v.step(&st, func(kt kv.Tx) error {
		if err := requireFeature(kt, featureGCMarker); err != nil {
			return err
		}
		return kt.Put(metaKey(metaGC), token)
	})
	if err != nil {
		return st, false, err
	}
	var dead []deadChunk
	err = v.eng.View(func(kt kv.Tx) error {
		if ok, err := holds(kt, token); err != nil || !ok {
			raced = !ok
			return err
		}
		live, err := chunkRefs(kt)
		if err != nil {
			return err
		}
		cp := []byte{prefixChunk}
		err = kv.ScanKeys(kt, cp, kv.PrefixEnd(cp), func(k []byte) (bool, error) {
			if len(k) == 1+sha256.Size && live[[sha256.Size]byte(k[1:])] {
				st.ChunksKept++
			} else {
				dead = append(dead, deadChunk{key: slices.Clone(k)})
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		// Sizes of the dead only: the live chunks' pages stay unread.
		for i := range dead {
			k := dead[i].key
			err := kv.ScanSizes(kt, k, append(slices.Clone(k), 0), func(_ []byte, n int) (bool, error) {
				dead[i].size = n
				return false, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || raced {
		return st, raced, err
	}
	if gcAfterMark != nil {
		gcAfterMark()
	}
	raced, err = v.sweep(&st, dead, metaKey(metaGC), token)
	return st, raced, err
}

// sweep deletes dead chunks, sweepStep to a transaction, while the marker
// at key still holds token (a writer that reuses a chunk deletes it: the
// sweep then stops, raced, and the collection starts over later). The
// last step deletes the marker. st counts what was freed.
func (v *Vault) sweep(st *GCStats, dead []deadChunk, key, token []byte) (raced bool, err error) {
	for {
		n := min(len(dead), sweepStep)
		step := dead[:n]
		last := n == len(dead)
		err := v.step(st, func(kt kv.Tx) error {
			ok, err := holdsAt(kt, key, token)
			if err != nil {
				return err
			}
			if !ok {
				return errGCRaced
			}
			for _, c := range step {
				if err := kt.Delete(c.key); err != nil {
					return err
				}
			}
			if last {
				return kt.Delete(key)
			}
			return nil
		})
		if errors.Is(err, errGCRaced) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range step {
			st.ChunksFreed++
			st.BytesFreed += int64(c.size)
		}
		if last {
			return false, nil
		}
		dead = dead[n:]
	}
}

// requireFeature adds feature to the header's features, if it is not
// there: builds that do not know it refuse the vault from then on.
func requireFeature(kt kv.Tx, feature string) error {
	b, err := kt.Get([]byte(headerKey))
	if err != nil {
		return corruptf("header: %v", err)
	}
	var h Header
	if err := json.Unmarshal(b, &h); err != nil {
		return corruptf("header: %v", err)
	}
	if slices.Contains(h.Features, feature) {
		return nil
	}
	h.Features = append(h.Features, feature)
	nb, _ := json.Marshal(h)
	return kt.Put([]byte(headerKey), nb)
}

// holds reports whether the vault's marker holds token.
func holds(kt kv.Tx, token []byte) (bool, error) { return holdsAt(kt, metaKey(metaGC), token) }

// holdsAt reports whether the marker at key holds token.
func holdsAt(kt kv.Tx, key, token []byte) (bool, error) {
	b, err := kt.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	return err == nil && bytes.Equal(b, token), err
}

// chunkRefs returns every chunk some chunk map of this file names.
func chunkRefs(kt kv.Tx) (map[[sha256.Size]byte]bool, error) {
	live := map[[sha256.Size]byte]bool{}
	fp := []byte{prefixFile}
	err := kt.Scan(fp, kv.PrefixEnd(fp), func(_, v []byte) (bool, error) {
		if len(v) == sha256.Size {
			live[[sha256.Size]byte(v)] = true
		}
		return true, nil
	})
	return live, err
}

// gcRetries bounds the collections GC starts over when writes keep
// reusing chunks under it.
const gcRetries = 3

// GC drops the layers no state reaches (working states a restore
// abandoned, checkpoints deleted before their layers were merged), frees
// the chunks no chunk map of this file names (none when the vault shares
// a chunk space with others: CollectShared frees those), then gives the freed room
// back to the host where the engine can do it a piece at a time. No step
// holds the write lock for long: writers go on beside it.
func (v *Vault) GC() (GCStats, error) {
	st, err := v.gc()
	if err != nil {
		return st, err
	}
	n, longest, err := v.reclaim()
	st.BytesReclaimed += n
	st.LongestStep = max(st.LongestStep, longest)
	if err != nil {
		return st, err
	}
	return st, v.recordGC()
}

// gc is GC without giving room back.
func (v *Vault) gc() (GCStats, error) {
	var st GCStats
	if err := v.dropUnreachable(&st); err != nil {
		return st, storageErr("gc", v.Name(), err)
	}
	if v.sharesChunks() {
		// Other vaults' chunk maps name chunks of the space too: only
		// CollectShared, over all of them, can tell one is dead.
		return st, nil
	}
	for range gcRetries {
		s, raced, err := v.collect()
		st.add(s)
		if err != nil {
			return st, storageErr("gc", v.Name(), err)
		}
		if !raced {
			break
		}
	}
	return st, nil
}

// recordGC leaves what a collection saw for AutoGC (metaGCStat).
func (v *Vault) recordGC() error {
	sp, ok := v.eng.(kv.Spacer)
	if !ok {
		return nil
	}
	space, err := sp.Space()
	if errors.Is(err, kv.ErrNoReclaim) {
		return nil
	}
	if err != nil {
		return storageErr("gc", v.Name(), err)
	}
	rec, _ := json.Marshal(gcStat{UsedBytes: space.UsedBytes})
	err = v.eng.Update(func(kt kv.Tx) error { return kt.Put(metaKey(metaGCStat), rec) })
	return storageErr("gc", v.Name(), err)
}

// reclaimStep bounds the room one reclaim transaction gives back.
const reclaimStep = 8 << 20

// Reclaim gives the engine's free room back to the host, reclaimStep
// bytes per write transaction, and returns how many bytes it gave. An
// engine that cannot do it a piece at a time gives nothing here (see
// Rewrite).
func (v *Vault) Reclaim() (int64, error) {
	n, _, err := v.reclaim()
	return n, err
}

// reclaim is Reclaim, also returning its longest step.
func (v *Vault) reclaim() (total int64, longest time.Duration, err error) {
	r, ok := v.eng.(kv.Reclaimer)
	if !ok {
		return 0, 0, nil
	}
	for {
		start := time.Now()
		n, err := r.Reclaim(reclaimStep)
		longest = max(longest, time.Since(start))
		total += n
		if errors.Is(err, kv.ErrNoReclaim) {
			return total, longest, nil
		}
		if err != nil {
			return total, longest, storageErr("gc", v.Name(), err)
		}
		if n == 0 {
			return total, longest, nil
		}
	}
}

// Rewrite copies the vault's file into a new one without free room
// (kv.Reclaimer.Rewrite): writers wait for it, O(file). It is the only way a bbolt file, or a SQLite file made before
// incremental reclaim, shrinks; a SQLite file is incremental after it.
// It returns the bytes the file shrank by.
func (v *Vault) Rewrite() (int64, error) {
	r, ok := v.eng.(kv.Reclaimer)
	if !ok {
		return 0, nil
	}
	before, err := r.Space()
	if errors.Is(err, kv.ErrNoReclaim) {
		return 0, nil
	}
	if err != nil {
		return 0, storageErr("rewrite", v.Name(), err)
	}
	if err := r.Rewrite(); err != nil {
		return 0, storageErr("rewrite", v.Name(), err)
	}
	after, err := r.Space()
	if err != nil {
		return 0, storageErr("rewrite", v.Name(), err)
	}
	return max(0, before.FileBytes-after.FileBytes), nil
}

// Automatic collection. Garbage takes room in a vault's file, so the
// growth of the room in use (kv.Space.UsedBytes) since the last
// collection bounds the garbage a new one could find. The last collection
// leaves what it saw under "M" "gcstat", for every process: AutoGC, called
// after writes, costs a look at the engine's space and one read until the
// room in use has grown by autoGCGrowth or by half of what was in use
// after the last collection, whichever is more. With the free room it
// keeps (reclaimKeep), the file then stays within about twice its live
// data, plus autoGCGrowth and reclaimKeep, plus what the engine keeps
// besides (a SQLite log of up to 64 MiB, bbolt's 16 MiB steps).

const (
	autoGCGrowth = 8 << 20
	// Free room goes back to the host once it is more than this and more
	// than a quarter of the room in use; less, later writes reuse it,
	// which costs nothing, where giving it back moves pages.
	reclaimKeep = 32 << 20
	// A file that cannot reclaim a piece at a time is rewritten once free
	// room is both more than this and more than half the file.
	rewriteFree = 32 << 20
)

// gcStat is the record of the last collection.
type gcStat struct {
	UsedBytes int64 `json:"used_bytes"` // the room in use after it
}

// AutoGC collects garbage and gives room back when the file has grown
// enough since the last collection (see above), and reports whether it
// ran. Each of its steps holds the write lock briefly, except a Rewrite
// (kv.Reclaimer) of a file with more free room than data.
func (v *Vault) AutoGC() (GCStats, bool, error) {
	sp, ok := v.eng.(kv.Spacer)
	if !ok {
		return GCStats{}, false, nil
	}
	space, err := sp.Space()
	if errors.Is(err, kv.ErrNoReclaim) {
		return GCStats{}, false, nil
	}
	if err != nil {
		return GCStats{}, false, storageErr("gc", v.Name(), err)
	}
	var last gcStat
	err = v.eng.View(func(kt kv.Tx) error {
		b, err := kt.Get(metaKey(metaGCStat))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err == nil && json.Unmarshal(b, &last) != nil {
			last = gcStat{} // unreadable: collect, and write it anew
		}
		return err
	})
	if err != nil {
		return GCStats{}, false, storageErr("gc", v.Name(), err)
	}
	if space.UsedBytes < last.UsedBytes+max(autoGCGrowth, last.UsedBytes/2) {
		return GCStats{}, false, nil
	}
	st, err := v.gc()
	if err != nil {
		return st, true, err
	}
	if space, err = sp.Space(); err != nil {
		return st, true, storageErr("gc", v.Name(), err)
	}
	switch {
	case space.Incremental && space.FreeBytes > max(reclaimKeep, space.UsedBytes/4):
		n, longest, err := v.reclaim()
		st.BytesReclaimed += n
		st.LongestStep = max(st.LongestStep, longest)
		if err != nil {
			return st, true, err
		}
	case !space.Incremental && space.FreeBytes > rewriteFree && space.FreeBytes > space.FileBytes/2:
		start := time.Now()
		n, err := v.Rewrite()
		st.LongestStep = max(st.LongestStep, time.Since(start))
		st.BytesReclaimed += n
		if err != nil {
			return st, true, err
		}
	}
	return st, true, v.recordGC()
}
