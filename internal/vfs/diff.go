package vfs

import (
	"bytes"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
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
	// From is the path before a rename (kind Renamed, see FindRenames).
	From string `json:"from,omitempty"`
}

// StateRef names a state: a vault's working state (Checkpoint ""), one
// of its checkpoints, or with After the state just after a checkpoint
// (see Vault.ViewAfter).
type StateRef struct {
	Vault      *Vault
	Checkpoint string
	After      bool
	layer      uint64 // a layer's state (a merge base), when not 0
}

// View runs fn read-only on the state r names.
func (r StateRef) View(fn func(*Tx) error) error {
	switch {
	case r.layer != 0:
		return r.Vault.runSpec(txSpec{layer: r.layer}, fn)
	case r.Checkpoint == "":
		return r.Vault.View(fn)
	case r.After:
		return r.Vault.ViewAfter(r.Checkpoint, fn)
	}
	return r.Vault.ViewAt(r.Checkpoint, fn)
}

func (r StateRef) view(fn func(*Tx) error) error { return r.View(fn) }

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
		return to.view(func(b *Tx) (err error) {
			out, err = diffIn(a, b)
			return err
		})
	})
	return out, err
}

// diffIn is Diff of the states two transactions read.
func diffIn(a, b *Tx) ([]Change, error) {
	d := &differ{a: a, b: b, seen: map[string]ChangeKind{}, visited: map[string]bool{}}
	if err := d.run(); err != nil {
		return nil, err
	}
	slices.SortFunc(d.changes, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return d.changes, nil
}

type differ struct {
	a, b    *Tx
	changes []Change
	seen    map[string]ChangeKind
	visited map[string]bool // paths compared
	memos   map[*Tx]*memo
}

// memo remembers what the differ read of one state, which does not
// change under it: a change set of a thousand new files in a hundred new
// dirs asks for the same parents' inodes and paths a thousand times
// (without it, a diff of 1,200 added files read 84 ms, nearly all of it
// lookups of the same records).
type memo struct {
	t      *Tx
	inodes map[Ino]*inode
	paths  map[Ino]string
	at     map[string]*inode // what lookup found at a path (nil: nothing)
}

func newMemo(t *Tx) *memo {
	return &memo{t: t, inodes: map[Ino]*inode{}, paths: map[Ino]string{}, at: map[string]*inode{}}
}

func (d *differ) memo(t *Tx) *memo {
	m := d.memos[t]
	if m == nil {
		m = newMemo(t)
		if d.memos == nil {
			d.memos = map[*Tx]*memo{}
		}
		d.memos[t] = m
	}
	return m
}

// inode is t.inode, remembered, its absence too (nil). The differ only
// reads what it returns.
func (m *memo) inode(ino Ino) (*inode, error) {
	if n, ok := m.inodes[ino]; ok {
		if n == nil {
			return nil, errs.E("stat", "", syscall.ENOENT)
		}
		return n, nil
	}
	n, err := m.t.inode(ino)
	if errs.Is(err, errs.NotFound) {
		m.inodes[ino] = nil
	}
	if err != nil {
		return nil, err
	}
	m.inodes[ino] = n
	return n, nil
}

// pathOf is t.PathOf, remembered for every dir on the way up.
func (m *memo) pathOf(ino Ino) (string, error) {
	type step struct {
		ino  Ino
		name string
	}
	var up []step // from ino towards the first dir whose path is known
	dir := "/"
	for ino != RootIno {
		if p, ok := m.paths[ino]; ok {
			dir = p
			break
		}
		n, err := m.inode(ino)
		if err != nil {
			return "", err
		}
		if len(n.links) == 0 {
			return "", errs.E("path", "", syscall.ENOENT)
		}
		if len(up) > 4096 {
			return "", corruptf("inode %d: parent chain does not reach the root", ino)
		}
		up = append(up, step{ino, n.links[0].Name})
		ino = n.links[0].Parent
	}
	for i := len(up) - 1; i >= 0; i-- {
		dir = joinPath(dir, up[i].name)
		m.paths[up[i].ino] = dir
	}
	return dir, nil
}

// lookup is lookupNoFollow, remembered per path and built on its parent's.
func (m *memo) lookup(p string) (*inode, error) {
	if n, ok := m.at[p]; ok {
		return n, nil
	}
	var n *inode
	var err error
	if p == "/" {
		n, err = m.inode(RootIno)
	} else {
		dir, name := path.Split(p)
		var parent *inode
		if parent, err = m.lookup(path.Clean(dir)); err == nil && parent != nil && parent.Type == TypeDir {
			var ino Ino
			var ok bool
			if ino, _, ok, err = m.t.entry(parent.Ino, name); err == nil && ok {
				n, err = m.inode(ino)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	m.at[p] = n
	return n, nil
}

// touched collects the vkeys written by the layers of t's chain that
// other's chain lacks, marking each with side.
func touched(t, other *Tx, into map[string]uint8, side uint8) error {
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
				into[string(k[len(prefix):])] |= side
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
	keys := map[string]uint8{}
	if err := touched(d.a, d.b, keys, 1); err != nil {
		return err
	}
	if err := touched(d.b, d.a, keys, 2); err != nil {
		return err
	}
	// Every touched record names candidate paths in the state whose
	// layers wrote it, on that state's terms: inode numbers of two
	// different vaults are not comparable. The other state's path of the
	// same record is a candidate already when it differs, as a path
	// changes only by a name that changed, whose record is touched too;
	// looking there as well read every new file's inode twice.
	cands := map[string]bool{}
	for k, sides := range keys {
		vkey := []byte(k)
		for i, t := range []*Tx{d.a, d.b} {
			if sides&(1<<i) == 0 {
				continue
			}
			var err error
			switch vkey[0] {
			case prefixDentry:
				err = d.memo(t).candidateEntry(vkeyIno(vkey), vkeyName(vkey), cands)
			case prefixInode, prefixFile, prefixXattr:
				err = d.memo(t).candidateInode(vkeyIno(vkey), cands)
			}
			if err != nil {
				return err
			}
		}
	}
	paths := make([]string, 0, len(cands))
	for p := range cands {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if d.visited[p] {
			continue // below a dir added or deleted whole, reported with it
		}
		na, err := d.memo(d.a).lookup(p)
		if err != nil {
			return err
		}
		nb, err := d.memo(d.b).lookup(p)
		if err != nil {
			return err
		}
		if err := d.compare(p, na, nb); err != nil {
			return err
		}
	}
	return nil
}

func (m *memo) candidateEntry(dir Ino, name string, into map[string]bool) error {
	p, err := m.pathOf(dir)
	if errs.Is(err, errs.NotFound) {
		return nil // the directory is not in this state
	}
	if err != nil {
		return err
	}
	into[joinPath(p, name)] = true
	return nil
}

func (m *memo) candidateInode(ino Ino, into map[string]bool) error {
	if ino == RootIno {
		into["/"] = true
		return nil
	}
	n, err := m.inode(ino)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, l := range n.links {
		if err := m.candidateEntry(l.Parent, l.Name, into); err != nil {
			return err
		}
	}
	return nil
}

// lookupNoFollow returns the inode at clean path p, following no symlink
// at all, or nil when the state has nothing there.
func lookupNoFollow(t *Tx, p string) (*inode, error) {
	n, err := t.inode(RootIno)
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(p, "/")[1:] {
		if name == "" {
			continue
		}
		if n.Type != TypeDir {
			return nil, nil
		}
		ino, _, ok, err := t.entry(n.Ino, name)
		if err != nil || !ok {
			return nil, err
		}
		if n, err = t.inode(ino); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// compare reports the difference at path p between what state a holds
// there (na) and what state b holds (nb), walking into directories that
// are not the same directory.
func (d *differ) compare(p string, na, nb *inode) error {
	if d.visited[p] {
		return nil
	}
	d.visited[p] = true
	if err := tooDeep(p); err != nil {
		return err
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
	}
	if err := d.attrs(p, na, nb); err != nil {
		return err
	}
	if na.Type == TypeDir && (na.Ino != nb.Ino || na.birth != nb.birth) {
		return d.dirs(p, na, nb)
	}
	return nil
}

// dirs compares two different directories entry by entry.
func (d *differ) dirs(p string, na, nb *inode) error {
	names := map[string][2]Ino{}
	for i, t := range []*Tx{d.a, d.b} {
		n := na
		if i == 1 {
			n = nb
		}
		entries, err := t.ReadDir(n.Ino)
		if err != nil {
			return err
		}
		for _, e := range entries {
			pair := names[e.Name]
			pair[i] = e.Ino
			names[e.Name] = pair
		}
	}
	for name, pair := range names {
		var ca, cb *inode
		var err error
		if pair[0] != 0 {
			if ca, err = d.memo(d.a).inode(pair[0]); err != nil {
				return err
			}
		}
		if pair[1] != 0 {
			if cb, err = d.memo(d.b).inode(pair[1]); err != nil {
				return err
			}
		}
		if err := d.compare(joinPath(p, name), ca, cb); err != nil {
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
	if err := tooDeep(p); err != nil {
		return err
	}
	entries, err := t.ReadDir(n.Ino)
	if err != nil {
		return err
	}
	for _, e := range entries {
		c, err := d.memo(t).inode(e.Ino)
		if err != nil {
			return err
		}
		cp := joinPath(p, e.Name)
		d.visited[cp] = true // reported here: the paths left need no lookup
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
