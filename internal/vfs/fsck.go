package vfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// FsckReport is what a consistency check found. A vault is consistent when
// Problems is empty.
type FsckReport struct {
	Layers      int      `json:"layers"`
	Checkpoints int      `json:"checkpoints"`
	States      int      `json:"states_checked"`
	Inodes      int      `json:"inodes"`
	Chunks      int      `json:"chunks"`
	Problems    []string `json:"problems"`
}

// OK reports whether no problem was found.
func (r *FsckReport) OK() bool { return len(r.Problems) == 0 }

func (r *FsckReport) addf(format string, args ...any) {
	if len(r.Problems) < 1000 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Fsck checks every invariant of the vault file: the layer graph, the
// checkpoint and pin records, the journal, the chunk store (every chunk's
// hash is recomputed), and the tree of the working state and of every
// checkpoint (entries, link counts, parent links, usage counters). It
// changes nothing.
func (v *Vault) Fsck() (*FsckReport, error) {
	r := &FsckReport{Problems: []string{}}
	var named []Checkpoint
	err := v.eng.View(func(kt kv.Tx) error {
		if err := fsckStore(kt, v.sharesChunks(), r); err != nil {
			return err
		}
		cps, err := listCheckpoints(kt)
		named = cps
		return err
	})
	if err != nil {
		return nil, storageErr("fsck", v.Name(), err)
	}
	r.Checkpoints = len(named)
	states := []string{""}
	for _, cp := range named {
		states = append(states, cp.Name)
	}
	for _, name := range states {
		run := v.View
		label := "working state"
		if name != "" {
			name := name
			run = func(fn func(*Tx) error) error { return v.ViewAt(name, fn) }
			label = "checkpoint " + name
		}
		err := run(func(t *Tx) error { return fsckTree(t, label, r) })
		if name != "" && errs.Is(err, errs.CheckpointNotFound) && v.checkpointDeleted(name) {
			// Another writer deleted it since the listing: each tree is
			// read in a transaction of its own.
			r.Checkpoints--
			continue
		}
		if err != nil {
			r.addf("%s: %v", label, err)
		}
		r.States++
	}
	return r, nil
}

// checkpointDeleted reports that no checkpoint record names name now (a
// record whose key and name disagree is still listed, and reported).
func (v *Vault) checkpointDeleted(name string) bool {
	var cps []Checkpoint
	err := v.eng.View(func(kt kv.Tx) (err error) {
		cps, err = listCheckpoints(kt)
		return err
	})
	return err == nil && !slices.ContainsFunc(cps, func(cp Checkpoint) bool { return cp.Name == name })
}

func listCheckpoints(kt kv.Tx) ([]Checkpoint, error) {
	var out []Checkpoint
	prefix := []byte{prefixCheckpoint}
	err := kt.Scan(prefix, kv.PrefixEnd(prefix), func(k, b []byte) (bool, error) {
		var cp Checkpoint
		if err := json.Unmarshal(b, &cp); err != nil {
			return false, corruptf("checkpoint %q: %v", k[1:], err)
		}
		out = append(out, cp)
		return true, nil
	})
	return out, err
}

// fsckStore checks the records of the file itself.
func fsckStore(kt kv.Tx, shared bool, r *FsckReport) error {
	layers := map[uint64]*layerRecord{}
	lp := []byte{prefixLayer}
	err := kt.Scan(lp, kv.PrefixEnd(lp), func(k, b []byte) (bool, error) {
		if len(k) != 9 {
			r.addf("layer key %x is malformed", k)
			return true, nil
		}
		id := u64From(k[1:])
		l, err := decodeLayer(b)
		if err != nil {
			r.addf("layer %d: %v", id, err)
			return true, nil
		}
		layers[id] = l
		return true, nil
	})
	if err != nil {
		return err
	}
	r.Layers = len(layers)
	for id, l := range layers {
		if l.Parent != 0 && layers[l.Parent] == nil {
			r.addf("layer %d: parent %d is missing", id, l.Parent)
		}
		if l.Parent >= id && l.Parent != 0 {
			r.addf("layer %d: parent %d is not older", id, l.Parent)
		}
		if l.Parent != 0 && layers[l.Parent] != nil && !layers[l.Parent].Frozen {
			r.addf("layer %d: parent %d is not frozen", id, l.Parent)
		}
	}
	top, err := getU64(kt, metaTop)
	if err != nil {
		r.addf("%v", err)
	} else if l := layers[top]; l == nil {
		r.addf("top layer %d is missing", top)
	} else if l.Frozen {
		r.addf("top layer %d is frozen", top)
	}
	for _, name := range []string{metaTopo, metaNextIno, metaNextLayer} {
		if _, err := getU64(kt, name); err != nil {
			r.addf("%v", err)
		}
	}
	if next, err := getU64(kt, metaNextLayer); err == nil {
		for id := range layers {
			if id >= next {
				r.addf("layer %d is not below the layer allocator %d", id, next)
			}
		}
	}
	cps, err := listCheckpoints(kt)
	if err != nil {
		r.addf("%v", err)
	}
	for _, cp := range cps {
		if l := layers[cp.Layer]; l == nil || !l.Frozen {
			r.addf("checkpoint %q names layer %d, which is missing or not frozen", cp.Name, cp.Layer)
		}
	}
	pins, err := listPins(kt)
	if err != nil {
		r.addf("%v", err)
	}
	for _, p := range pins {
		if l := layers[p.Layer]; l == nil || !l.Frozen {
			r.addf("fork %q pins layer %d, which is missing or not frozen", p.Name, p.Layer)
		}
	}
	return fsckRecords(kt, layers, shared, r)
}

// fsckRecords checks versioned records against the journal, and chunks.
func fsckRecords(kt kv.Tx, layers map[uint64]*layerRecord, shared bool, r *FsckReport) error {
	journal := map[string]bool{}
	jp := []byte{prefixJournal}
	err := kt.Scan(jp, kv.PrefixEnd(jp), func(k, _ []byte) (bool, error) {
		if len(k) < 10 {
			r.addf("journal key %x is malformed", k)
			return true, nil
		}
		layer := u64From(k[1:9])
		if layers[layer] == nil {
			r.addf("journal entry of missing layer %d", layer)
		}
		journal[string(versionKey(k[9:], layer))] = true
		return true, nil
	})
	if err != nil {
		return err
	}
	refs := map[string]bool{}
	for _, p := range []byte{prefixInode, prefixDentry, prefixFile, prefixXattr, prefixOrphan} {
		err := kt.Scan([]byte{p}, []byte{p + 1}, func(k, v []byte) (bool, error) {
			_, layer, ok := splitVersion(k)
			switch {
			case !ok:
				r.addf("record key %x is malformed", k)
			case layers[layer] == nil:
				r.addf("record %x belongs to missing layer %d", k, layer)
			case !journal[string(k)]:
				r.addf("record %x of layer %d is not in the journal", k, layer)
			}
			delete(journal, string(k))
			if p == prefixFile && len(v) > 0 {
				if len(v) != sha256.Size {
					r.addf("chunk map entry %x is malformed", k)
				} else {
					refs[string(v)] = true
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	for k := range journal {
		r.addf("journal entry %x has no record", k)
	}
	check := func(k, v []byte) (bool, error) {
		r.Chunks++
		sum := sha256.Sum256(v)
		if !bytes.Equal(sum[:], k[1:]) {
			r.addf("chunk %x: data does not match its hash", k[1:min(len(k), 9)])
		}
		delete(refs, string(k[1:]))
		return true, nil
	}
	if shared {
		// The space holds every vault's chunks: check this one's.
		for sum := range refs {
			k := chunkKey([]byte(sum))
			v, err := kt.Get(k)
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			_, _ = check(k, v)
		}
	} else {
		cp := []byte{prefixChunk}
		if err := kt.Scan(cp, kv.PrefixEnd(cp), check); err != nil {
			return err
		}
	}
	for sum := range refs {
		r.addf("chunk %x is referenced but missing", []byte(sum)[:8])
	}
	return nil
}

func u64From(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

// fsckTree walks one state's tree from the root and checks that entries,
// inodes, link counts and usage counters agree.
func fsckTree(t *Tx, label string, r *FsckReport) error {
	type seenInode struct {
		n     *inode
		names []link
	}
	seen := map[Ino]*seenInode{}
	var bytes, files int64
	var walk func(dir *inode, depth int) error
	walk = func(dir *inode, depth int) error {
		if depth > 4096 {
			r.addf("%s: directory %d: tree deeper than 4096 levels (a cycle?)", label, dir.Ino)
			return nil
		}
		entries, err := t.ReadDir(dir.Ino)
		if err != nil {
			return err
		}
		subdirs := uint32(0)
		for _, e := range entries {
			n, err := t.inode(e.Ino)
			if err != nil {
				r.addf("%s: entry %q in directory %d points to missing inode %d", label, e.Name, dir.Ino, e.Ino)
				continue
			}
			if n.Type != e.Type {
				r.addf("%s: entry %q in directory %d says %s, inode %d is %s", label, e.Name, dir.Ino, e.Type, n.Ino, n.Type)
			}
			s := seen[n.Ino]
			if s == nil {
				s = &seenInode{n: n}
				seen[n.Ino] = s
				files++
				if n.Type == TypeFile {
					bytes += int64(n.Size)
					fsckChunks(t, label, n, r)
				}
			} else if n.Type == TypeDir {
				r.addf("%s: directory %d has more than one name", label, n.Ino)
				continue
			}
			s.names = append(s.names, link{Parent: dir.Ino, Name: e.Name})
			if n.Type == TypeDir {
				subdirs++
				if err := walk(n, depth+1); err != nil {
					return err
				}
			}
		}
		if dir.Nlink != 2+subdirs {
			r.addf("%s: directory %d has nlink %d, want %d", label, dir.Ino, dir.Nlink, 2+subdirs)
		}
		return nil
	}
	root, err := t.inode(RootIno)
	if err != nil {
		r.addf("%s: root directory is missing", label)
		return nil
	}
	if root.Type != TypeDir {
		r.addf("%s: root is not a directory", label)
		return nil
	}
	if err := walk(root, 0); err != nil {
		return err
	}
	rootX, err := t.xattrUsage(RootIno)
	if err != nil {
		return err
	}
	bytes += rootX
	for ino, s := range seen {
		r.Inodes++
		xb, err := t.xattrUsage(ino)
		if err != nil {
			return err
		}
		bytes += xb
		if s.n.Type != TypeDir && int(s.n.Nlink) != len(s.names) {
			r.addf("%s: inode %d has nlink %d but %d names", label, ino, s.n.Nlink, len(s.names))
		}
		want, got := slices.Clone(s.names), slices.Clone(s.n.links)
		cmp := func(a, b link) int {
			if a.Parent != b.Parent {
				return int(a.Parent) - int(b.Parent)
			}
			return strings.Compare(a.Name, b.Name)
		}
		slices.SortFunc(want, cmp)
		slices.SortFunc(got, cmp)
		if !slices.Equal(want, got) {
			r.addf("%s: inode %d records names %v but is named %v", label, ino, got, want)
		}
	}
	orphans, err := t.Orphans()
	if err != nil {
		return err
	}
	for _, ino := range orphans {
		n, err := t.inode(ino)
		switch {
		case err != nil:
			r.addf("%s: orphan %d has no inode", label, ino)
			continue
		case n.Type != TypeFile || n.Nlink != 0 || len(n.links) != 0:
			r.addf("%s: orphan %d is a %s with %d links", label, ino, n.Type, n.Nlink)
		case seen[ino] != nil:
			r.addf("%s: orphan %d has a name", label, ino)
		}
		r.Inodes++
		files++
		xb, err := t.xattrUsage(ino)
		if err != nil {
			return err
		}
		bytes += int64(n.Size) + xb
		fsckChunks(t, label, n, r)
	}
	u, err := t.Usage()
	if err != nil {
		return err
	}
	if u.Bytes != bytes || u.Files != files {
		r.addf("%s: usage counters say %d bytes in %d files, the tree holds %d bytes in %d files",
			label, u.Bytes, u.Files, bytes, files)
	}
	return nil
}

// fsckChunks checks that a file has no chunk past its end and that every
// chunk it maps is readable.
func fsckChunks(t *Tx, label string, n *inode, r *FsckReport) {
	count := (n.Size + ChunkSize - 1) / ChunkSize
	prefix := chunkGenPrefix(n.Ino, n.gen)
	decided := map[uint64]bool{}
	for i := range t.c.segs {
		layers := t.c.segs[i].layers
		_ = t.txs[i].Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
			vkey, layer, ok := splitVersion(k)
			if !ok || !layers[layer] || len(vkey) != 25 {
				return true, nil
			}
			index := u64From(vkey[17:25])
			if decided[index] {
				return true, nil
			}
			decided[index] = true
			if len(v) > 0 && index >= count {
				r.addf("%s: inode %d maps chunk %d past its end (size %d)", label, n.Ino, index, n.Size)
			}
			return true, nil
		})
	}
	for i := uint64(0); i < count; i++ {
		data, err := t.chunkData(n, i)
		if err != nil {
			r.addf("%s: inode %d chunk %d: %v", label, n.Ino, i, err)
			continue
		}
		if uint64(len(data)) > ChunkSize {
			r.addf("%s: inode %d chunk %d is larger than a chunk", label, n.Ino, i)
		}
		if end := i*ChunkSize + uint64(len(data)); end > n.Size {
			r.addf("%s: inode %d chunk %d holds data past the file's end", label, n.Ino, i)
		}
	}
}
