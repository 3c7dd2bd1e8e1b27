package vfs

import (
	"bytes"
	"slices"
	"strings"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// ChangeKind classifies one path in a diff.
type ChangeKind string

// The kinds of change. A path whose content changed is modified; one whose
// permissions or owner changed and nothing else is mode_changed; a path
// that now holds another type of file is type_changed. Time stamps alone
// are not a change.
const (
	Added       ChangeKind = "added"
	Modified    ChangeKind = "modified"
	Deleted     ChangeKind = "deleted"
	TypeChanged ChangeKind = "type_changed"
	ModeChanged ChangeKind = "mode_changed"
)

// Change is one changed path between two states.
type Change struct {
	Path       string     `json:"path"`
	Kind       ChangeKind `json:"kind"`
	Type       string     `json:"type"` // the file type after the change (before, for deletions)
	SizeBefore int64      `json:"size_before"`
	SizeAfter  int64      `json:"size_after"`
}

// StateRef names a state: a vault's working state (Checkpoint "") or one
// of its checkpoints.
type StateRef struct {
	Vault      *Vault
	Checkpoint string
}

func (r StateRef) view(fn func(*Tx) error) error {
	if r.Checkpoint == "" {
		return r.Vault.View(fn)
	}
	return r.Vault.ViewAt(r.Checkpoint, fn)
}

// layerID names a layer across files.
type layerID struct {
	vault string
	layer uint64
}

// Diff lists the paths that differ between two states, sorted by path.
// Only the layers that one state has and the other lacks are read, through
// their journals; file data is never read, only chunk hashes compared.
func Diff(from, to StateRef) ([]Change, error) {
	var out []Change
	err := from.view(func(a *Tx) error {
		return to.view(func(b *Tx) error {
			d := &differ{a: a, b: b, seen: map[string]ChangeKind{}}
			if err := d.run(); err != nil {
				return err
			}
			out = d.changes
			return nil
		})
	})
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return out, err
}

type differ struct {
	a, b    *Tx
	changes []Change
	seen    map[string]ChangeKind
}

// touched collects the vkeys written by the layers of t's chain that
// other's chain lacks.
func touched(t, other *Tx, into map[string]bool) error {
	have := map[layerID]bool{}
	for _, s := range other.c.segs {
		for l := range s.layers {
			have[layerID{s.v.ID(), l}] = true
		}
	}
	for i, s := range t.c.segs {
		for l := range s.layers {
			if have[layerID{s.v.ID(), l}] {
				continue
			}
			prefix := u64([]byte{prefixJournal}, l)
			err := t.txs[i].Scan(prefix, kv.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
				into[string(k[len(prefix):])] = true
				return true, nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *differ) run() error {
	keys := map[string]bool{}
	if err := touched(d.a, d.b, keys); err != nil {
		return err
	}
	if err := touched(d.b, d.a, keys); err != nil {
		return err
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	inodes := map[Ino]bool{}
	for _, k := range sorted {
		vkey := []byte(k)
		switch vkey[0] {
		case prefixDentry:
			if err := d.entryChanged(vkeyIno(vkey), vkeyName(vkey)); err != nil {
				return err
			}
		case prefixInode, prefixFile, prefixXattr:
			inodes[vkeyIno(vkey)] = true
		}
	}
	for ino := range inodes {
		if err := d.inodeChanged(ino); err != nil {
			return err
		}
	}
	return nil
}

// entryChanged compares dir/name in both states.
func (d *differ) entryChanged(dir Ino, name string) error {
	ia, _, okA, err := d.a.entry(dir, name)
	if err != nil {
		return err
	}
	ib, _, okB, err := d.b.entry(dir, name)
	if err != nil {
		return err
	}
	if okA && okB && ia == ib {
		return nil
	}
	// The path of the entry: the directory may exist in one state only.
	var p string
	if okB {
		p, err = d.b.PathOf(dir)
	} else {
		p, err = d.a.PathOf(dir)
	}
	if err != nil {
		return nil // the directory itself went or came: its own entry reports it
	}
	return d.compare(joinPath(p, name), ia, okA, ib, okB)
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// compare reports the difference at path p between inode ia of state a
// and ib of state b, walking directories that are not the same inode.
func (d *differ) compare(p string, ia Ino, okA bool, ib Ino, okB bool) error {
	var na, nb *inode
	var err error
	if okA {
		if na, err = d.a.inode(ia); err != nil {
			return err
		}
	}
	if okB {
		if nb, err = d.b.inode(ib); err != nil {
			return err
		}
	}
	switch {
	case na == nil && nb == nil:
		return nil
	case na == nil:
		d.add(p, Added, nil, nb)
		return d.subtree(d.b, p, nb, Added)
	case nb == nil:
		d.add(p, Deleted, na, nil)
		return d.subtree(d.a, p, na, Deleted)
	case na.Type != nb.Type:
		d.add(p, TypeChanged, na, nb)
		if err := d.subtree(d.a, p, na, Deleted); err != nil {
			return err
		}
		return d.subtree(d.b, p, nb, Added)
	case na.Type == TypeDir:
		if ia != ib {
			if err := d.attrs(p, na, nb); err != nil {
				return err
			}
			return d.dirs(p, na, nb)
		}
		return nil
	}
	return d.attrs(p, na, nb)
}

// dirs compares two different directory inodes entry by entry.
func (d *differ) dirs(p string, na, nb *inode) error {
	ea, err := d.a.ReadDir(na.Ino)
	if err != nil {
		return err
	}
	eb, err := d.b.ReadDir(nb.Ino)
	if err != nil {
		return err
	}
	byName := map[string][2]*DirEntry{}
	for i := range ea {
		byName[ea[i].Name] = [2]*DirEntry{&ea[i], nil}
	}
	for i := range eb {
		pair := byName[eb[i].Name]
		pair[1] = &eb[i]
		byName[eb[i].Name] = pair
	}
	for name, pair := range byName {
		var ia, ib Ino
		if pair[0] != nil {
			ia = pair[0].Ino
		}
		if pair[1] != nil {
			ib = pair[1].Ino
		}
		if ia == ib && ia != 0 && pair[0].Type != TypeDir {
			// Same inode in both: changes to it are found through the journal.
			continue
		}
		if err := d.compare(joinPath(p, name), ia, pair[0] != nil, ib, pair[1] != nil); err != nil {
			return err
		}
	}
	return nil
}

// subtree reports every path below directory n as kind.
func (d *differ) subtree(t *Tx, p string, n *inode, kind ChangeKind) error {
	if n.Type != TypeDir {
		return nil
	}
	entries, err := t.ReadDir(n.Ino)
	if err != nil {
		return err
	}
	for _, e := range entries {
		c, err := t.inode(e.Ino)
		if err != nil {
			return err
		}
		cp := joinPath(p, e.Name)
		if kind == Added {
			d.add(cp, kind, nil, c)
		} else {
			d.add(cp, kind, c, nil)
		}
		if err := d.subtree(t, cp, c, kind); err != nil {
			return err
		}
	}
	return nil
}

// inodeChanged reports an inode present in both states whose record,
// data or attributes were touched, at every name it has in the new state.
func (d *differ) inodeChanged(ino Ino) error {
	na, errA := d.a.inode(ino)
	nb, errB := d.b.inode(ino)
	if errA != nil || errB != nil {
		return nil // created or deleted: the entry change reports it
	}
	for _, l := range nb.links {
		dir, err := d.b.PathOf(l.Parent)
		if err != nil {
			continue
		}
		if err := d.attrs(joinPath(dir, l.Name), na, nb); err != nil {
			return err
		}
	}
	if ino == RootIno {
		return d.attrs("/", na, nb)
	}
	return nil
}

// attrs compares two inodes of one type at path p.
func (d *differ) attrs(p string, na, nb *inode) error {
	same, err := d.sameContent(na, nb)
	if err != nil {
		return err
	}
	switch {
	case !same:
		d.add(p, Modified, na, nb)
	case na.Mode != nb.Mode || na.Uid != nb.Uid || na.Gid != nb.Gid:
		d.add(p, ModeChanged, na, nb)
	}
	return nil
}

// sameContent compares what two inodes hold, by chunk hash, never by data.
func (d *differ) sameContent(na, nb *inode) (bool, error) {
	if na.Size != nb.Size || na.target != nb.target || na.Rdev != nb.Rdev {
		return false, nil
	}
	if na.Type == TypeFile {
		for i := uint64(0); i*ChunkSize < na.Size; i++ {
			ra, _, okA, err := d.a.chunkRef(na, i)
			if err != nil {
				return false, err
			}
			rb, _, okB, err := d.b.chunkRef(nb, i)
			if err != nil {
				return false, err
			}
			if okA != okB || !bytes.Equal(ra, rb) {
				return false, nil
			}
		}
	}
	xa, err := d.a.ListXattr(na.Ino)
	if err != nil {
		return false, err
	}
	xb, err := d.b.ListXattr(nb.Ino)
	if err != nil {
		return false, err
	}
	if !slices.Equal(xa, xb) {
		return false, nil
	}
	for _, name := range xa {
		va, err := d.a.GetXattr(na.Ino, name)
		if err != nil {
			return false, err
		}
		vb, err := d.b.GetXattr(nb.Ino, name)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(va, vb) {
			return false, nil
		}
	}
	return true, nil
}

var kindRank = map[ChangeKind]int{TypeChanged: 4, Added: 3, Deleted: 3, Modified: 2, ModeChanged: 1}

// add records a change, keeping the strongest kind seen for a path.
func (d *differ) add(p string, kind ChangeKind, before, after *inode) {
	if old, ok := d.seen[p]; ok && kindRank[old] >= kindRank[kind] {
		return
	}
	c := Change{Path: p, Kind: kind}
	if before != nil {
		c.SizeBefore = int64(before.Size)
		c.Type = before.Type.String()
	}
	if after != nil {
		c.SizeAfter = int64(after.Size)
		c.Type = after.Type.String()
	}
	if _, ok := d.seen[p]; ok {
		for i := range d.changes {
			if d.changes[i].Path == p {
				d.changes[i] = c
			}
		}
	} else {
		d.changes = append(d.changes, c)
	}
	d.seen[p] = kind
}
