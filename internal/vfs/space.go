package vfs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"slices"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// SpaceReport says what a vault's file holds, by who needs it. Chunk bytes
// are counted once per chunk, in the file that stores them: a fork's
// report leaves out what it reads from its parent's file.
type SpaceReport struct {
	// LiveBytes is the chunks the working state reads from this file.
	LiveBytes int64 `json:"live_bytes"`
	// CheckpointBytes is the chunks only checkpoints, and the layers forks
	// stand on, still reach: they go when those are deleted and the vault
	// compacted.
	CheckpointBytes int64 `json:"checkpoint_bytes"`
	// GarbageBytes is the chunks no state reaches: the next collection
	// frees them (after a compaction, for layers nothing names).
	GarbageBytes int64 `json:"garbage_bytes"`
	// FreeBytes is room inside the file that holds no data; the engine
	// gives it back to the host (kv.Reclaimer) or reuses it.
	FreeBytes int64 `json:"free_bytes"`
	// FileBytes is what the vault's file takes on disk, side files
	// included.
	FileBytes int64 `json:"file_bytes"`
}

// Space reports what the vault's file holds. It reads every chunk map and
// inode record of the file, but no chunk data: O(records).
func (v *Vault) Space() (SpaceReport, error) {
	var r SpaceReport
	err := v.eng.View(func(kt kv.Tx) error {
		g, err := loadGraph(kt)
		if err != nil {
			return err
		}
		reach := g.reachable()
		top, err := getU64(kt, metaTop)
		if err != nil {
			return err
		}
		working, err := ownLayers(kt, top)
		if err != nil {
			return err
		}
		gens, err := visibleGens(kt, working)
		if err != nil {
			return err
		}
		live := map[[sha256.Size]byte]bool{}
		held := map[[sha256.Size]byte]bool{}
		var group []byte // the chunk map whose versions are being read
		seen := false    // the working state's version of group was found
		fp := []byte{prefixFile}
		err = kt.Scan(fp, kv.PrefixEnd(fp), func(k, val []byte) (bool, error) {
			vkey, layer, ok := splitVersion(k)
			if !ok || len(vkey) != 1+24 {
				return true, nil
			}
			if !bytes.Equal(vkey, group) {
				group, seen = slices.Clone(vkey), false
			}
			if len(val) != sha256.Size {
				if working[layer] {
					seen = true // a whiteout hides older versions
				}
				return true, nil
			}
			sum := [sha256.Size]byte(val)
			if reach[layer] {
				held[sum] = true
			}
			if working[layer] && !seen {
				seen = true
				ino := vkeyIno(vkey)
				if gen, ok := gens[ino]; !ok || gen == u64From(vkey[9:17]) {
					live[sum] = true
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		cp := []byte{prefixChunk}
		if v.sharesChunks() {
			// The space holds every vault's chunks: weigh this one's;
			// what no vault names is the space's garbage, not its.
			weigh := func(sum [sha256.Size]byte, into *int64) error {
				k := chunkKey(sum[:])
				return kv.ScanSizes(kt, k, append(k, 0), func(_ []byte, n int) (bool, error) {
					*into += int64(n)
					return false, nil
				})
			}
			for sum := range live {
				if err := weigh(sum, &r.LiveBytes); err != nil {
					return err
				}
			}
			for sum := range held {
				if live[sum] {
					continue
				}
				if err := weigh(sum, &r.CheckpointBytes); err != nil {
					return err
				}
			}
			return nil
		}
		return kv.ScanSizes(kt, cp, kv.PrefixEnd(cp), func(k []byte, n int) (bool, error) {
			var sum [sha256.Size]byte
			copy(sum[:], k[1:])
			switch {
			case live[sum]:
				r.LiveBytes += int64(n)
			case held[sum]:
				r.CheckpointBytes += int64(n)
			default:
				r.GarbageBytes += int64(n)
			}
			return true, nil
		})
	})
	if err != nil {
		return r, storageErr("vault info", v.Name(), err)
	}
	if sp, ok := v.eng.(kv.Spacer); ok {
		s, err := sp.Space()
		switch {
		case err == nil:
			r.FreeBytes, r.FileBytes = s.FreeBytes, s.FileBytes
			return r, nil
		case !errors.Is(err, kv.ErrNoReclaim):
			return r, storageErr("vault info", v.Name(), err)
		}
	}
	if p := v.eng.Path(); p != "" {
		if fi, err := os.Stat(p); err == nil {
			r.FileBytes = fi.Size()
		}
	}
	return r, nil
}

// visibleGens returns the data generation of every inode the working
// state (its layers of this file) sees; an inode it sees deleted, or
// that only a parent's file holds, is absent.
func visibleGens(kt kv.Tx, working map[uint64]bool) (map[Ino]uint64, error) {
	gens := map[Ino]uint64{}
	var last Ino
	done := false
	ip := []byte{prefixInode}
	err := kt.Scan(ip, kv.PrefixEnd(ip), func(k, val []byte) (bool, error) {
		vkey, layer, ok := splitVersion(k)
		if !ok || len(vkey) != 9 || !working[layer] {
			return true, nil
		}
		ino := vkeyIno(vkey)
		if ino == last && done {
			return true, nil
		}
		last, done = ino, true
		if len(val) == 0 {
			return true, nil
		}
		n, err := decodeInode(ino, val)
		if err != nil {
			return false, corruptf("inode %d: %v", ino, err)
		}
		gens[ino] = n.gen
		return true, nil
	})
	return gens, err
}
