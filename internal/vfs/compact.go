package vfs

import (
	"errors"
	"slices"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// CompactStats says what compaction did.
type CompactStats struct {
	LayersDropped int `json:"layers_dropped"` // unreachable layers deleted
	LayersMerged  int `json:"layers_merged"`  // unnamed frozen layers merged into their only child
	Records       int `json:"records"`        // versioned records moved or deleted
}

// graph is the layer graph of one file and which layers something names.
type graph struct {
	layers   map[uint64]*layerRecord
	named    map[uint64]bool // the top, checkpoints and fork pins
	children map[uint64][]uint64
}

func loadGraph(kt kv.Tx) (*graph, error) {
	g := &graph{layers: map[uint64]*layerRecord{}, named: map[uint64]bool{}, children: map[uint64][]uint64{}}
	lp := []byte{prefixLayer}
	err := kt.Scan(lp, kv.PrefixEnd(lp), func(k, b []byte) (bool, error) {
		l, err := decodeLayer(b)
		if err != nil || len(k) != 9 {
			return false, corruptf("layer record %x is malformed", k)
		}
		g.layers[u64From(k[1:])] = l
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	top, err := getU64(kt, metaTop)
	if err != nil {
		return nil, err
	}
	g.named[top] = true
	cps, err := listCheckpoints(kt)
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		g.named[cp.Layer] = true
	}
	pins, err := listPins(kt)
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		g.named[p.Layer] = true
	}
	for id, l := range g.layers {
		if l.Parent != 0 {
			g.children[l.Parent] = append(g.children[l.Parent], id)
		}
	}
	// The layer a checkpoint's save started, once sealed or frozen, is the
	// state after it (ViewAfter, run:ID^after, also after an undo):
	// merging it into its child would put later writes in it. A working
	// state a restore abandoned unfrozen is no such state and goes.
	for _, cp := range cps {
		if kids := g.children[cp.Layer]; len(kids) > 0 {
			if first := slices.Min(kids); g.layers[first].Frozen {
				g.named[first] = true
			}
		}
	}
	return g, nil
}

// reachable returns the layers some named layer's state reads.
func (g *graph) reachable() map[uint64]bool {
	seen := map[uint64]bool{}
	for id := range g.named {
		for id != 0 && !seen[id] && g.layers[id] != nil {
			seen[id] = true
			id = g.layers[id].Parent
		}
	}
	return seen
}

// Compact drops layers no state can reach (the working states that
// restores abandoned, checkpoints that were deleted) and merges each frozen
// layer that nothing names into its only child, so chains stay short. Every
// step is one transaction: a crash between steps leaves a consistent vault.
func (v *Vault) Compact() (CompactStats, error) {
	var st CompactStats
	for {
		progressed := false
		var freed uint64 // the layer this step deleted, dropped or merged away
		err := v.eng.Update(func(kt kv.Tx) error {
			freed = 0
			g, err := loadGraph(kt)
			if err != nil {
				return err
			}
			reach := g.reachable()
			ids := make([]uint64, 0, len(g.layers))
			for id := range g.layers {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			// Children first (a child's id is always larger than its
			// parent's), so no step leaves a layer whose parent is gone.
			for _, id := range slices.Backward(ids) {
				if !reach[id] {
					freed = id
					n, err := dropLayer(kt, id)
					st.Records += n
					st.LayersDropped++
					progressed = true
					if err != nil {
						return err
					}
					return bumpTopo(kt)
				}
			}
			for _, id := range ids {
				kids := g.children[id]
				if g.named[id] || len(kids) != 1 || !g.layers[id].Frozen {
					continue
				}
				freed = id
				n, err := mergeLayer(kt, id, kids[0], g)
				st.Records += n
				st.LayersMerged++
				progressed = true
				if err != nil {
					return err
				}
				return bumpTopo(kt)
			}
			return nil
		})
		if err != nil {
			return st, storageErr("compact", v.Name(), err)
		}
		if freed != 0 {
			v.layersFreed(freed)
		}
		if !progressed {
			return st, nil
		}
	}
}

// journalOf lists the vkeys a layer wrote.
func journalOf(kt kv.Tx, layer uint64) ([][]byte, error) {
	prefix := u64([]byte{prefixJournal}, layer)
	var out [][]byte
	err := kt.Scan(prefix, kv.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
		out = append(out, slices.Clone(k[len(prefix):]))
		return true, nil
	})
	return out, err
}

// dropLayer deletes a layer and everything it wrote.
func dropLayer(kt kv.Tx, id uint64) (int, error) {
	vkeys, err := journalOf(kt, id)
	if err != nil {
		return 0, err
	}
	for _, vk := range vkeys {
		if err := kt.Delete(versionKey(vk, id)); err != nil {
			return 0, err
		}
		if err := kt.Delete(journalKey(id, vk)); err != nil {
			return 0, err
		}
	}
	return len(vkeys), kt.Delete(layerKey(id))
}

// mergeLayer folds layer m into its only child c: c keeps its own
// versions, takes m's others, and inherits m's parent. c's state is
// unchanged, and no other state reads m. m's chunk maps and xattrs of an
// inode that c's state sees deleted, or at a later data generation, are
// dropped rather than moved: c's state cannot reach them, and moved they
// would keep their chunks from garbage collection for good.
func mergeLayer(kt kv.Tx, m, c uint64, g *graph) (int, error) {
	vkeys, err := journalOf(kt, m)
	if err != nil {
		return 0, err
	}
	seen := map[Ino]inodeSeen{}
	for _, vk := range vkeys {
		mk := versionKey(vk, m)
		val, err := kt.Get(mk)
		if err != nil {
			return 0, corruptf("journal of layer %d names a missing record: %v", m, err)
		}
		val = slices.Clone(val)
		ck := versionKey(vk, c)
		hidden, err := hiddenFrom(kt, vk, m, c, seen)
		if err != nil {
			return 0, err
		}
		_, cerr := kt.Get(ck)
		switch {
		case cerr != nil && !errors.Is(cerr, kv.ErrNotFound):
			return 0, cerr
		case cerr == nil || hidden:
			// c has its own version, or cannot see m's: m's goes.
		default:
			if err := kt.Put(ck, val); err != nil {
				return 0, err
			}
			if err := kt.Put(journalKey(c, vk), nil); err != nil {
				return 0, err
			}
		}
		if err := kt.Delete(mk); err != nil {
			return 0, err
		}
		if err := kt.Delete(journalKey(m, vk)); err != nil {
			return 0, err
		}
	}
	child := *g.layers[c]
	child.Parent = g.layers[m].Parent
	if err := kt.Put(layerKey(c), encodeLayer(&child)); err != nil {
		return 0, err
	}
	return len(vkeys), kt.Delete(layerKey(m))
}

// inodeSeen is what a merge's child sees of one inode.
type inodeSeen struct {
	known, gone bool
	gen         uint64
}

// hiddenFrom reports whether vkey, a chunk map or xattr of layer m, is
// out of sight of c's state: its inode is deleted there, or (a chunk map)
// at another data generation. An inode whose record neither c nor m
// holds is taken as seen: the record is kept.
func hiddenFrom(kt kv.Tx, vkey []byte, m, c uint64, seen map[Ino]inodeSeen) (bool, error) {
	if len(vkey) < 9 || vkey[0] != prefixFile && vkey[0] != prefixXattr {
		return false, nil
	}
	ino := vkeyIno(vkey)
	s, ok := seen[ino]
	if !ok {
		for _, layer := range []uint64{c, m} {
			b, err := kt.Get(versionKey(inodeVKey(ino), layer))
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return false, err
			}
			s.known = true
			if len(b) == 0 {
				s.gone = true
			} else {
				n, err := decodeInode(ino, b)
				if err != nil {
					return false, corruptf("inode %d: %v", ino, err)
				}
				s.gen = n.gen
			}
			break
		}
		seen[ino] = s
	}
	switch {
	case !s.known:
		return false, nil
	case s.gone:
		return true, nil
	}
	return vkey[0] == prefixFile && len(vkey) >= 17 && u64From(vkey[9:17]) != s.gen, nil
}
