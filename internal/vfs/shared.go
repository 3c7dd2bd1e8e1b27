package vfs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"slices"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// A shared chunk space. An engine may keep the chunk keys ("C") of many
// vaults in one space (kv.Capabilities.SharedPrefix; the PostgreSQL
// engine's Shared, which the registry asks for in a store): every vault of
// the store then reads and writes one content-addressed space, so
// identical content is stored once and a fork copies no chunk (shareChunk
// finds the parent's chunk already there).
//
// A chunk there is live while a chunk map of any vault of the space names
// it, so a vault alone can never tell that a chunk is dead: GC of one
// vault frees no chunk (it still drops its unreachable layers), and the
// chunks are collected by CollectShared over every vault of the space.
// Its marker is the one-byte key "C", inside the space, and a write that
// reuses a chunk deletes it as it deletes a vault's own marker. The
// engine queues the writers of every vault of the space on one lock (and
// its transactions are serializable besides), so a sweep step and such a
// write follow each other as they do in one vault's file.

// ChunkPrefix is the prefix of the chunk keys: the range an engine shares
// to give vaults one chunk space.
var ChunkPrefix = []byte{prefixChunk}

// sharedGCKey is the marker of a collection of a shared space.
var sharedGCKey = []byte{prefixChunk}

// sharesChunks reports whether the vault's chunks are in a space other
// vaults share.
func (v *Vault) sharesChunks() bool { return sharesChunks(v.eng) }

func sharesChunks(eng kv.Engine) bool {
	c, ok := eng.(kv.Capable)
	return ok && len(c.Capabilities().SharedPrefix) > 0 && bytes.HasPrefix(ChunkPrefix, c.Capabilities().SharedPrefix)
}

// noteSharedReuse deletes the marker of a collection of the shared space
// in progress.
func noteSharedReuse(kt kv.Tx) error {
	have, err := kv.Has(kt, sharedGCKey)
	if err != nil || !have {
		return err
	}
	return kt.Delete(sharedGCKey)
}

// ErrNotShared is returned by CollectShared for vaults whose chunks are
// not in one shared space.
var ErrNotShared = errors.New("vfs: the vaults do not share a chunk space")

// CollectShared frees the chunks of a shared chunk space that no chunk
// map of any of vaults names. vaults must be every vault whose engine
// shares the space (the registry lists a store's catalog): a chunk only a
// vault left out names would be freed. A vault made while it runs is
// safe: its first writes of a chunk that exists delete the marker, and
// the sweep stops.
func CollectShared(vaults []*Vault) (GCStats, error) {
	var st GCStats
	if len(vaults) == 0 {
		return st, nil
	}
	for _, v := range vaults {
		if !v.sharesChunks() {
			return st, ErrNotShared
		}
	}
	for range gcRetries {
		s, raced, err := collectShared(vaults)
		st.add(s)
		if err != nil || !raced {
			return st, err
		}
	}
	return st, nil
}

func collectShared(vaults []*Vault) (st GCStats, raced bool, err error) {
	v0 := vaults[0]
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	if err := v0.step(&st, func(kt kv.Tx) error { return kt.Put(sharedGCKey, token) }); err != nil {
		return st, false, storageErr("gc", v0.Name(), err)
	}
	// The candidates, listed after the marker is in place: a chunk stored
	// later is not one, and one stored again is a reuse.
	var keys [][]byte
	err = v0.eng.View(func(kt kv.Tx) error {
		return kv.ScanKeys(kt, ChunkPrefix, kv.PrefixEnd(ChunkPrefix), func(k []byte) (bool, error) {
			if len(k) == 1+sha256.Size {
				keys = append(keys, slices.Clone(k))
			}
			return true, nil
		})
	})
	if err != nil {
		return st, false, storageErr("gc", v0.Name(), err)
	}
	live := map[[sha256.Size]byte]bool{}
	for _, v := range vaults {
		err := v.eng.View(func(kt kv.Tx) error {
			refs, err := chunkRefs(kt)
			for sum := range refs {
				live[sum] = true
			}
			return err
		})
		if err != nil {
			return st, false, storageErr("gc", v.Name(), err)
		}
	}
	var dead []deadChunk
	err = v0.eng.View(func(kt kv.Tx) error {
		if ok, err := holdsShared(kt, token); err != nil || !ok {
			raced = !ok
			return err
		}
		for _, k := range keys {
			if live[[sha256.Size]byte(k[1:])] {
				st.ChunksKept++
				continue
			}
			c := deadChunk{key: k}
			err := kv.ScanSizes(kt, k, append(slices.Clone(k), 0), func(_ []byte, n int) (bool, error) {
				c.size = n
				return false, nil
			})
			if err != nil {
				return err
			}
			dead = append(dead, c)
		}
		return nil
	})
	if err != nil || raced {
		return st, raced, storageErr("gc", v0.Name(), err)
	}
	if gcAfterMark != nil {
		gcAfterMark()
	}
	raced, err = v0.sweep(&st, dead, sharedGCKey, token)
	return st, raced, storageErr("gc", v0.Name(), err)
}

func holdsShared(kt kv.Tx, token []byte) (bool, error) { return holdsAt(kt, sharedGCKey, token) }
