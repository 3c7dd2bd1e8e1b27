package vfs_test

import (
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Drawing random operations that fit the model's current tree.

var modelNames = []string{"a", "b", "c", "d", "e"}

// drawName mostly picks a short name from a small set, so that names
// collide; now and then an invalid one.
func drawName(t *rapid.T, label string) string {
	i := rapid.IntRange(0, 39).Draw(t, label)
	switch {
	case i < 38:
		return modelNames[i%len(modelNames)]
	case i == 38:
		return rapid.SampledFrom([]string{".", ".."}).Draw(t, label+"-dot")
	}
	return strings.Repeat("n", vfs.NameMax+1)
}

type drawCtx struct {
	t       *rapid.T
	all     []string // every path, sorted
	dirs    []string
	files   []string
	nonRoot []string
	root    *mnode
}

func newDrawCtx(t *rapid.T, root *mnode) *drawCtx {
	d := &drawCtx{t: t, root: root}
	for p, n := range flatten(root) {
		d.all = append(d.all, p)
		switch n.typ {
		case vfs.TypeDir:
			d.dirs = append(d.dirs, p)
		case vfs.TypeFile:
			d.files = append(d.files, p)
		}
		if p != "/" {
			d.nonRoot = append(d.nonRoot, p)
		}
	}
	slices.Sort(d.all)
	slices.Sort(d.dirs)
	slices.Sort(d.files)
	slices.Sort(d.nonRoot)
	return d
}

// node picks any path.
func (d *drawCtx) node(label string) string {
	return rapid.SampledFrom(d.all).Draw(d.t, label)
}

// file picks a regular file, sometimes any node.
func (d *drawCtx) file(label string) string {
	if len(d.files) > 0 && rapid.IntRange(0, 9).Draw(d.t, label+"-any") > 0 {
		return rapid.SampledFrom(d.files).Draw(d.t, label)
	}
	return d.node(label)
}

// parent picks a directory, sometimes any node (ENOTDIR).
func (d *drawCtx) parent(label string) string {
	if rapid.IntRange(0, 9).Draw(d.t, label+"-any") == 0 {
		return d.node(label)
	}
	return rapid.SampledFrom(d.dirs).Draw(d.t, label)
}

// entry picks a directory and a name in it: mostly an existing entry.
func (d *drawCtx) entry(label string, existing int) (string, string) {
	if len(d.nonRoot) > 0 && rapid.IntRange(0, 99).Draw(d.t, label+"-existing") < existing {
		p := rapid.SampledFrom(d.nonRoot).Draw(d.t, label)
		dir, name := vfs.SplitPath(p)
		return dir, name
	}
	return d.parent(label + "-dir"), drawName(d.t, label+"-name")
}

func drawOp(t *rapid.T, root *mnode) *fsOp {
	var kinds []opKind
	for k := opMkdir; k <= opCopy; k++ {
		for range opWeights[k] {
			kinds = append(kinds, k)
		}
	}
	d := newDrawCtx(t, root)
	o := &fsOp{kind: rapid.SampledFrom(kinds).Draw(t, "op")}
	switch o.kind {
	case opMkdir, opCreate, opSymlink:
		o.path = d.parent("parent")
		o.name = drawName(t, "name")
		o.mode = rapid.SampledFrom([]uint32{0o755, 0o644, 0o600, 0o4755, 0o1777, 0o170644}).Draw(t, "mode")
		o.target = rapid.SampledFrom([]string{"a", "../b/c", "/abs/path", "x", "y/z", strings.Repeat("t", 300), ""}).Draw(t, "target")
	case opRead:
		o.path = d.file("file")
		o.off, o.n = drawWrite(t, lookup(root, o.path))
	case opWrite:
		o.path = d.file("file")
		o.off, o.n = drawWrite(t, lookup(root, o.path))
		if rapid.IntRange(0, 7).Draw(t, "zeros") > 0 {
			o.fill = byte(rapid.IntRange(1, 255).Draw(t, "fill"))
		}
	case opTruncate:
		o.path = d.file("file")
		o.size = drawSize(t, lookup(root, o.path))
	case opUnlink, opRmdir:
		o.path, o.name = d.entry("entry", 85)
	case opRename:
		o.path, o.name = d.entry("from", 90)
		o.path2, o.name2 = d.entry("to", 50)
		o.flags = uint32(rapid.SampledFrom([]int{0, 0, 0, vfs.RenameNoReplace, vfs.RenameExchange, vfs.RenameExchange, 3}).Draw(t, "flags"))
	case opLink:
		o.path = d.file("file")
		o.path2 = d.parent("dir")
		o.name2 = drawName(t, "name")
	case opCopy:
		o.path = d.file("from")
		o.path2 = d.file("to")
	case opChmod:
		o.path = d.node("node")
		o.mode = rapid.SampledFrom([]uint32{0o700, 0o644, 0o755, 0o2750, 0o100600}).Draw(t, "mode")
	case opSetXattr, opRemoveXattr:
		o.path = d.node("node")
		o.xname = rapid.SampledFrom([]string{"user.a", "user.b", "trusted.c"}).Draw(t, "xattr")
		if o.kind == opSetXattr {
			o.n = rapid.IntRange(0, 20).Draw(t, "xlen")
			o.fill = byte(rapid.IntRange(1, 255).Draw(t, "xfill"))
			o.flags = uint32(rapid.SampledFrom([]int{0, 0, vfs.XattrCreate, vfs.XattrReplace}).Draw(t, "xflags"))
		}
	}
	return o
}

// drawWrite picks an offset and length: at the start, at or past the end
// (leaving a hole), around a chunk boundary; mostly small, sometimes more
// than a chunk, now and then ~150 KiB.
func drawWrite(t *rapid.T, n *mnode) (int64, int) {
	size := len(n.data)
	var off int
	switch rapid.IntRange(0, 5).Draw(t, "offkind") {
	case 0:
		off = 0
	case 1:
		off = size
	case 2:
		off = rapid.IntRange(0, size).Draw(t, "off")
	case 3:
		off = vfs.ChunkSize - rapid.IntRange(0, 64).Draw(t, "off")
	case 4:
		off = size + rapid.IntRange(1, 70000).Draw(t, "off")
	case 5:
		off = 2*vfs.ChunkSize - rapid.IntRange(0, 64).Draw(t, "off")
	}
	var length int
	switch k := rapid.IntRange(0, 19).Draw(t, "lenkind"); {
	case k < 15:
		length = rapid.IntRange(0, 300).Draw(t, "len")
	case k < 19:
		length = rapid.IntRange(vfs.ChunkSize-100, vfs.ChunkSize+100).Draw(t, "len")
	default:
		length = rapid.IntRange(140<<10, 160<<10).Draw(t, "len")
	}
	// Keep files small enough that a sequence stays fast.
	const maxSize = 400 << 10
	if off+length > maxSize {
		off = max(0, maxSize-length)
	}
	return int64(off), length
}

func drawSize(t *rapid.T, n *mnode) uint64 {
	size := len(n.data)
	switch rapid.IntRange(0, 5).Draw(t, "sizekind") {
	case 0:
		return 0
	case 1:
		return uint64(size / rapid.IntRange(2, 4).Draw(t, "shrink"))
	case 2:
		return uint64(size + rapid.IntRange(1, 100).Draw(t, "grow"))
	case 3:
		return uint64(vfs.ChunkSize + rapid.IntRange(-3, 3).Draw(t, "size"))
	case 4:
		return uint64(rapid.IntRange(0, 3*vfs.ChunkSize).Draw(t, "size"))
	}
	return uint64(size)
}
