package vfs

import (
	"slices"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// LayerRef names one layer of a state's chain: the vault file holding it
// and its id there. Empty layers hold no record (a checkpoint taken with
// nothing written since the last one): a state reads the same with or
// without them, which lets a cache of materialized layers (package
// overlay) share one entry between every state and fork that differ only
// by empty layers.
type LayerRef struct {
	VaultID string
	Layer   uint64
	Empty   bool
	Frozen  bool
}

// StateLayers lists the layers a state reads through, newest first: the
// working state's (checkpoint "") or a checkpoint's.
func (v *Vault) StateLayers(checkpoint string) ([]LayerRef, error) {
	var cp *string
	if checkpoint != "" {
		cp = &checkpoint
	}
	return v.stateLayers(txSpec{checkpoint: cp})
}

// LayerIDs lists the layers this vault's file holds, in any order: what
// a cache keyed by layer keeps (the rest were freed).
func (v *Vault) LayerIDs() ([]uint64, error) {
	var out []uint64
	err := v.eng.View(func(kt kv.Tx) error {
		g, err := loadGraph(kt)
		if err != nil {
			return err
		}
		for id := range g.layers {
			out = append(out, id)
		}
		return nil
	})
	return out, storageErr("layers", v.Name(), err)
}

// LayersAt lists the layers the state of frozen layer id of this vault's
// own file reads through, newest (id) first.
func (v *Vault) LayersAt(id uint64) ([]LayerRef, error) {
	return v.stateLayers(txSpec{layer: id})
}

// ViewLayer runs fn read-only on the state of frozen layer id of this
// vault's own file.
func (v *Vault) ViewLayer(id uint64, fn func(*Tx) error) error {
	return v.runSpec(txSpec{layer: id}, fn)
}

func (v *Vault) stateLayers(spec txSpec) ([]LayerRef, error) {
	var out []LayerRef
	err := v.runSpec(spec, func(t *Tx) error {
		for i, s := range t.c.segs {
			ids := make([]uint64, 0, len(s.layers))
			for id := range s.layers {
				ids = append(ids, id)
			}
			// A layer's parent is always older, so has a smaller id.
			slices.SortFunc(ids, func(a, b uint64) int { return cmpU64(b, a) })
			for _, id := range ids {
				r, err := layerInfo(t.txs[i], id)
				if err != nil {
					return err
				}
				r.VaultID = s.v.ID()
				out = append(out, r)
			}
		}
		return nil
	})
	return out, storageErr("layers", v.Name(), err)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func layerInfo(kt kv.Tx, id uint64) (LayerRef, error) {
	l, err := getLayer(kt, id)
	if err != nil {
		return LayerRef{}, err
	}
	empty, err := layerEmpty(kt, id)
	return LayerRef{Layer: id, Empty: empty, Frozen: l.Frozen}, err
}

// layerEmpty reports whether layer id has no journal entry: nothing was
// ever written in it.
func layerEmpty(kt kv.Tx, id uint64) (bool, error) {
	prefix := u64([]byte{prefixJournal}, id)
	empty := true
	err := kt.Scan(prefix, kv.PrefixEnd(prefix), func(_, _ []byte) (bool, error) {
		empty = false
		return false, nil
	})
	return empty, err
}

// Sealed is what UpdateSealed froze: the layer fn wrote into, and whether
// it held nothing before fn ran (then the layer holds exactly what fn
// wrote).
type Sealed struct {
	Layer     uint64
	WasEmpty  bool
	Unchanged bool // fn wrote nothing
}

// UpdateSealed runs fn on the working state in a write transaction and, in
// the same transaction, freezes the layer it wrote into and goes on in a
// new top layer, as Seal does. An ingest of an overlay run's upper dir
// uses it: the frozen layer is then exactly the base plus what was
// ingested, with no moment in which another writer could add to it.
func (v *Vault) UpdateSealed(fn func(*Tx) error) (Sealed, error) {
	var s Sealed
	if err := v.checkGuard(); err != nil {
		return s, err
	}
	body := v.body(txSpec{write: true, latest: true}, fn)
	err := v.eng.Update(func(kt kv.Tx) error {
		top, err := getU64(kt, metaTop)
		if err != nil {
			return err
		}
		if s.WasEmpty, err = layerEmpty(kt, top); err != nil {
			return err
		}
		if err := body(kt); err != nil {
			return err
		}
		after, err := layerEmpty(kt, top)
		if err != nil {
			return err
		}
		s.Unchanged = after
		s.Layer, _, err = freezeTop(kt, v.now())
		return err
	})
	if v.cache != nil {
		v.cache.settled(err == nil)
	}
	return s, storageErr("seal", v.Name(), err)
}

// UpdateOver runs fn on a working state that stands directly on frozen
// layer base, in one write transaction, and with seal freezes the layer
// fn wrote as UpdateSealed does. A top layer over base that holds records
// already is set aside for a new empty one first: what an earlier
// UpdateOver of the same changes wrote there (an overlay workspace
// persisted mid-run, then ingests its whole upper again at the end) is
// replaced, not applied twice. A working state that no longer stands on
// base (a checkpoint was restored meanwhile) fails with CorruptVault and
// changes nothing.
//
// A working state that stands on one of the layers in also instead (what
// an earlier UpdateOver wrote, frozen since by a checkpoint saved while
// an overlay mount lived) also gets a new empty top over base: the
// caller's changes are again all of them, relative to base, and the
// checkpoint keeps its layer. A top that is itself in also is set aside
// even when empty, so the layer fn writes is never one named in also.
func (v *Vault) UpdateOver(base uint64, seal bool, fn func(*Tx) error, also ...uint64) (Sealed, error) {
	var s Sealed
	if err := v.checkGuard(); err != nil {
		return s, err
	}
	body := v.body(txSpec{write: true, latest: true}, fn)
	err := v.eng.Update(func(kt kv.Tx) error {
		top, err := getU64(kt, metaTop)
		if err != nil {
			return err
		}
		l, err := getLayer(kt, top)
		if err != nil {
			return err
		}
		rebase := l.Parent != base && slices.Contains(also, l.Parent)
		if (l.Parent != base && !rebase) || l.Frozen {
			return corruptf("the working state (layer %d) no longer stands on layer %d", top, base)
		}
		empty, err := layerEmpty(kt, top)
		if err != nil {
			return err
		}
		if !empty || rebase || slices.Contains(also, top) {
			b, err := getLayer(kt, base)
			if err != nil {
				return err
			}
			if err := newTop(kt, base, b, v.now()); err != nil {
				return err
			}
			if top, err = getU64(kt, metaTop); err != nil {
				return err
			}
		}
		s.WasEmpty = true
		if err := body(kt); err != nil {
			return err
		}
		if s.Unchanged, err = layerEmpty(kt, top); err != nil {
			return err
		}
		s.Layer = top
		if seal {
			_, _, err = freezeTop(kt, v.now())
		}
		return err
	})
	if v.cache != nil {
		v.cache.settled(err == nil)
	}
	return s, storageErr("update", v.Name(), err)
}
