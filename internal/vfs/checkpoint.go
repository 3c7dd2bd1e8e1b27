package vfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// Checkpoint is a named, frozen state of a vault.
type Checkpoint struct {
	Name      string    `json:"name"`
	Layer     uint64    `json:"layer"`
	CreatedAt time.Time `json:"created_at"`
	Message   string    `json:"message,omitempty"`
	Bytes     int64     `json:"bytes"`
	Files     int64     `json:"files"`
}

// ValidName reports whether name is 1 to max characters of
// [A-Za-z0-9_] and the bytes of extra, not starting with one of extra.
// (A bounded regexp repetition would cost milliseconds to compile at
// every start of avfs.)
func ValidName(name string, max int, extra string) bool {
	if name == "" || len(name) > max {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case strings.IndexByte(extra, c) >= 0 && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckName validates a checkpoint name: 1–128 characters of
// [A-Za-z0-9_.-], not starting with '-' or '.'.
func CheckName(kind, name string) error {
	if !ValidName(name, 128, ".-") {
		return &errs.Error{Kind: errs.InvalidInput, Path: name,
			Err:  fmt.Errorf("invalid %s name %q", kind, name),
			Hint: "use 1-128 characters of A-Z a-z 0-9 _ . -, not starting with - or ."}
	}
	return nil
}

func getCheckpoint(kt kv.Tx, name string) (Checkpoint, error) {
	var cp Checkpoint
	b, err := kt.Get(checkpointKey(name))
	if errors.Is(err, kv.ErrNotFound) {
		return cp, &errs.Error{Kind: errs.CheckpointNotFound, Op: "checkpoint", Path: name,
			Err: fmt.Errorf("no checkpoint named %q", name)}
	}
	if err != nil {
		return cp, err
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return cp, corruptf("checkpoint %q: %v", name, err)
	}
	return cp, nil
}

// layerAfter returns the layer that saving cp started: the first child of
// cp's layer (a restore of cp starts later ones, with higher ids).
func layerAfter(kt kv.Tx, cp Checkpoint) (uint64, error) {
	var found uint64
	start := layerKey(cp.Layer + 1)
	err := kt.Scan(start, kv.PrefixEnd([]byte{prefixLayer}), func(k, b []byte) (bool, error) {
		l, err := decodeLayer(b)
		if err != nil || len(k) != 9 {
			return false, corruptf("layer record %x is malformed", k)
		}
		if l.Parent == cp.Layer {
			found = u64From(k[1:])
			return false, nil
		}
		return true, nil
	})
	if err == nil && found == 0 {
		err = corruptf("no layer stands on checkpoint %q", cp.Name)
	}
	return found, err
}

// freezeTop freezes the top layer and puts a new empty one over it, which
// inherits the usage counters. It returns the frozen layer. O(1).
func freezeTop(kt kv.Tx, now time.Time) (frozen uint64, rec *layerRecord, err error) {
	top, err := getU64(kt, metaTop)
	if err != nil {
		return 0, nil, err
	}
	l, err := getLayer(kt, top)
	if err != nil {
		return 0, nil, err
	}
	l.Frozen = true
	if err := kt.Put(layerKey(top), encodeLayer(l)); err != nil {
		return 0, nil, err
	}
	return top, l, newTop(kt, top, l, now)
}

// newTop starts a new writable layer over parent and makes it the top.
func newTop(kt kv.Tx, parent uint64, parentRec *layerRecord, now time.Time) error {
	id, err := getU64(kt, metaNextLayer)
	if err != nil {
		return err
	}
	rec := layerRecord{Parent: parent, Created: now, Bytes: parentRec.Bytes, Files: parentRec.Files}
	for _, kvp := range [][2][]byte{
		{metaKey(metaNextLayer), u64(nil, id+1)},
		{layerKey(id), encodeLayer(&rec)},
		{metaKey(metaTop), u64(nil, id)},
	} {
		if err := kt.Put(kvp[0], kvp[1]); err != nil {
			return err
		}
	}
	return bumpTopo(kt)
}

func bumpTopo(kt kv.Tx) error {
	topo, err := getU64(kt, metaTopo)
	if err != nil {
		return err
	}
	return kt.Put(metaKey(metaTopo), u64(nil, topo+1))
}

// SaveCheckpoint freezes the working state under name (a generated one
// when name is empty) and goes on in a new top layer. O(1).
func (v *Vault) SaveCheckpoint(name, message string) (Checkpoint, error) {
	var cp Checkpoint
	if name != "" {
		if err := CheckName("checkpoint", name); err != nil {
			return cp, err
		}
	}
	err := v.eng.Update(func(kt kv.Tx) error {
		if name == "" {
			top, err := getU64(kt, metaTop)
			if err != nil {
				return err
			}
			name = fmt.Sprintf("cp-%d", top)
		}
		if _, err := kt.Get(checkpointKey(name)); err == nil {
			return &errs.Error{Kind: errs.AlreadyExists, Op: "checkpoint save", Path: name,
				Err: fmt.Errorf("checkpoint %q already exists", name)}
		}
		now := v.now()
		layer, rec, err := freezeTop(kt, now)
		if err != nil {
			return err
		}
		cp = Checkpoint{Name: name, Layer: layer, CreatedAt: now.UTC(), Message: message, Bytes: rec.Bytes, Files: rec.Files}
		b, _ := json.Marshal(cp)
		return kt.Put(checkpointKey(name), b)
	})
	return cp, storageErr("checkpoint save", v.Name(), err)
}

// Seal freezes the working state without naming it and goes on in a new
// top layer, so that what was written so far stays apart from what comes
// next: a proxy run seals its writes, and ViewAfter of its checkpoint then
// reads exactly what the run left. O(1).
func (v *Vault) Seal() error {
	err := v.eng.Update(func(kt kv.Tx) error {
		_, _, err := freezeTop(kt, v.now())
		return err
	})
	return storageErr("seal", v.Name(), err)
}

// Checkpoints lists the vault's checkpoints, oldest first.
func (v *Vault) Checkpoints() ([]Checkpoint, error) {
	var out []Checkpoint
	err := v.eng.View(func(kt kv.Tx) error {
		prefix := []byte{prefixCheckpoint}
		return kt.Scan(prefix, kv.PrefixEnd(prefix), func(k, b []byte) (bool, error) {
			var cp Checkpoint
			if err := json.Unmarshal(b, &cp); err != nil {
				return false, corruptf("checkpoint %q: %v", k[1:], err)
			}
			out = append(out, cp)
			return true, nil
		})
	})
	slices.SortFunc(out, func(a, b Checkpoint) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return int(a.Layer) - int(b.Layer)
	})
	return out, storageErr("checkpoint list", v.Name(), err)
}

// GetCheckpoint returns one checkpoint.
func (v *Vault) GetCheckpoint(name string) (Checkpoint, error) {
	var cp Checkpoint
	err := v.eng.View(func(kt kv.Tx) (err error) {
		cp, err = getCheckpoint(kt, name)
		return err
	})
	return cp, storageErr("checkpoint info", v.Name(), err)
}

// RestoreCheckpoint makes the named checkpoint the working state again: a
// new top layer over the checkpoint's layer. Unsaved changes of the old
// working state are discarded; every checkpoint stays available. O(1).
func (v *Vault) RestoreCheckpoint(name string) error {
	if err := v.checkGuard(); err != nil {
		return err
	}
	err := v.eng.Update(func(kt kv.Tx) error {
		cp, err := getCheckpoint(kt, name)
		if err != nil {
			return err
		}
		rec, err := getLayer(kt, cp.Layer)
		if err != nil {
			return err
		}
		return newTop(kt, cp.Layer, rec, v.now())
	})
	return storageErr("checkpoint restore", v.Name(), err)
}

// RestoreAfter makes the state just after the named checkpoint (what
// ViewAfter reads: a proxy run's sealed writes) the working state again,
// provided the working state is still the checkpoint's own state, as a
// restore of it left it: `proxy redo` after `proxy undo`. A working state
// that moved on since (anything written, another checkpoint restored) is
// Conflict, and an after state that was never sealed is NotFound; either
// changes nothing. The check and the switch are one transaction. O(1) in
// the size of the vault.
func (v *Vault) RestoreAfter(name string) error {
	if err := v.checkGuard(); err != nil {
		return err
	}
	err := v.eng.Update(func(kt kv.Tx) error {
		cp, err := getCheckpoint(kt, name)
		if err != nil {
			return err
		}
		after, err := layerAfter(kt, cp)
		if err != nil {
			return err
		}
		rec, err := getLayer(kt, after)
		if err != nil {
			return err
		}
		if !rec.Frozen {
			return &errs.Error{Kind: errs.NotFound, Op: "checkpoint restore", Path: name,
				Err: fmt.Errorf("no sealed state after checkpoint %q", name)}
		}
		top, err := getU64(kt, metaTop)
		if err != nil {
			return err
		}
		have, err := settledLayer(kt, top)
		if err != nil {
			return err
		}
		want, err := settledLayer(kt, cp.Layer)
		if err != nil {
			return err
		}
		if have != want {
			return &errs.Error{Kind: errs.Conflict, Op: "checkpoint restore", Path: name,
				Err:  fmt.Errorf("the working state is no longer checkpoint %q's: it changed since", name),
				Hint: "`avfs checkpoint restore " + name + "` first to discard what changed, or save it as a checkpoint"}
		}
		return newTop(kt, after, rec, v.now())
	})
	return storageErr("checkpoint restore", v.Name(), err)
}

// settledLayer returns the nearest layer at or below layer that wrote
// something (or the first layer of the file): layers that wrote nothing
// add nothing to a state, so two layers with the same settled layer hold
// the same state. A restore's fresh top and a seal's empty successor are
// such layers.
func settledLayer(kt kv.Tx, layer uint64) (uint64, error) {
	for {
		prefix := u64([]byte{prefixJournal}, layer)
		empty := true
		err := kt.Scan(prefix, kv.PrefixEnd(prefix), func(_, _ []byte) (bool, error) {
			empty = false
			return false, nil
		})
		if err != nil || !empty {
			return layer, err
		}
		l, err := getLayer(kt, layer)
		if err != nil || l.Parent == 0 {
			return layer, err
		}
		layer = l.Parent
	}
}

// DeleteCheckpoint forgets a checkpoint. Its layer stays as long as a later
// state needs it; compaction merges or drops it once nothing names it.
func (v *Vault) DeleteCheckpoint(name string) error {
	err := v.eng.Update(func(kt kv.Tx) error {
		if _, err := getCheckpoint(kt, name); err != nil {
			return err
		}
		return kt.Delete(checkpointKey(name))
	})
	return storageErr("checkpoint delete", v.Name(), err)
}

// ForkPin is a parent's record of a fork standing on one of its layers.
type ForkPin struct {
	Name      string    `json:"name"`
	VaultID   string    `json:"vault_id"`
	Layer     uint64    `json:"layer"`
	CreatedAt time.Time `json:"created_at"`
}

// Forks lists the forks that stand on this vault.
func (v *Vault) Forks() ([]ForkPin, error) {
	var out []ForkPin
	err := v.eng.View(func(kt kv.Tx) (err error) {
		out, err = listPins(kt)
		return err
	})
	return out, storageErr("vault forks", v.Name(), err)
}

func listPins(kt kv.Tx) ([]ForkPin, error) {
	var out []ForkPin
	prefix := []byte{prefixPin}
	err := kt.Scan(prefix, kv.PrefixEnd(prefix), func(k, b []byte) (bool, error) {
		var p ForkPin
		if err := json.Unmarshal(b, &p); err != nil {
			return false, corruptf("fork pin %q: %v", k[1:], err)
		}
		out = append(out, p)
		return true, nil
	})
	return out, err
}

// Fork makes child, a new empty engine, a fork of this vault named
// childName, and returns it open; opener opens its parents. The parent's
// top layer is frozen and pinned for the fork first, so a crash can leave
// at most an unused pin, never a fork standing on an unpinned layer. O(1):
// nothing is copied.
func (v *Vault) Fork(child kv.Engine, childName string, opener Opener) (*Vault, error) {
	var pin ForkPin
	var rec *layerRecord
	var nextIno uint64
	var quota Quota
	now := v.now()
	hdr := newHeader(childName, now)
	if !v.countsXattrs() { // the fork inherits the counters
		hdr.Features = slices.DeleteFunc(slices.Clone(hdr.Features), func(f string) bool { return f == featureXattrUsage })
	}
	err := v.eng.Update(func(kt kv.Tx) error {
		layer, r, err := freezeTop(kt, now)
		if err != nil {
			return err
		}
		rec = r
		if nextIno, err = getU64(kt, metaNextIno); err != nil {
			return err
		}
		qb, err := kt.Get(metaKey(metaQuota))
		if err != nil {
			return corruptf("quota record: %v", err)
		}
		if err := json.Unmarshal(qb, &quota); err != nil {
			return corruptf("quota record: %v", err)
		}
		// A pin of the same name is stale: the registry only forks to a
		// name that no vault file holds.
		pin = ForkPin{Name: childName, VaultID: hdr.VaultID, Layer: layer, CreatedAt: now.UTC()}
		b, _ := json.Marshal(pin)
		return kt.Put(pinKey(childName), b)
	})
	if err != nil {
		return nil, storageErr("vault fork", v.Name(), err)
	}
	base := &forkBase{VaultID: v.ID(), Name: v.Name(), Layer: pin.Layer}
	first := layerRecord{Created: now, Bytes: rec.Bytes, Files: rec.Files}
	err = child.Update(func(kt kv.Tx) error {
		return initFile(kt, hdr, nextIno, 2, quota, base, first)
	})
	if err != nil {
		_ = v.Unpin(childName, hdr.VaultID)
		return nil, storageErr("vault fork", childName, err)
	}
	return &Vault{eng: child, hdr: hdr, opener: opener, now: time.Now}, nil
}

// Unpin removes the pin of fork forkName, when it belongs to the fork with
// id forkID (any id when forkID is empty): the fork was deleted. The layer
// it pinned becomes compactable.
func (v *Vault) Unpin(forkName, forkID string) error {
	err := v.eng.Update(func(kt kv.Tx) error {
		b, err := kt.Get(pinKey(forkName))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var p ForkPin
		if json.Unmarshal(b, &p) == nil && forkID != "" && p.VaultID != forkID {
			return nil // the name was forked again since: that pin is live
		}
		return kt.Delete(pinKey(forkName))
	})
	return storageErr("vault unpin", v.Name(), err)
}

// Base returns the parent vault's name and id when this vault is a fork.
func (v *Vault) Base() (name, id string, ok bool, err error) {
	err = v.eng.View(func(kt kv.Tx) error {
		b, err := kt.Get(metaKey(metaBase))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var base forkBase
		if err := json.Unmarshal(b, &base); err != nil {
			return corruptf("fork base record: %v", err)
		}
		name, id, ok = base.Name, base.VaultID, true
		return nil
	})
	return name, id, ok, storageErr("vault info", v.Name(), err)
}
