package vfs_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The model test runs random sequences of operations against vaults and
// against a plain in-memory reference model, and requires them to agree:
// the errno of every operation, the tree of every vault's working state and
// of every checkpoint, fsck, and Diff.
//
// The model follows the vault's documented (Linux-like) order of error
// checks. Where Linux picks another errno for the same input, the model
// notes it.

func TestModel(t *testing.T) {
	for _, engine := range []string{"mem", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			checks := map[string]int{"mem": 200, "sqlite": 40}[engine]
			setRapidChecks(t, checks)
			root := t.TempDir()
			rapid.Check(t, func(rt *rapid.T) {
				newModelRun(rt, engine, root).run()
			})
		})
	}
}

// setRapidChecks sets how many sequences rapid.Check tries, unless the run
// chose it with -rapid.checks or RAPID_CHECKS. rapid has no per-call
// setting, so the flag is set and restored. (-short divides it by 5.)
func setRapidChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || rapidChecksChosen() {
		return
	}
	old := f.Value.String()
	if err := flag.Set(f.Name, fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(f.Name, old) })
}

// rapidChecksChosen tells whether the run set the number of checks; it is
// decided once, before setRapidChecks sets the flag itself.
var rapidChecksChosen = sync.OnceValue(func() bool {
	_, chosen := os.LookupEnv("RAPID_CHECKS")
	flag.Visit(func(g *flag.Flag) { chosen = chosen || g.Name == "rapid.checks" })
	return chosen
})

// mnode is one inode of the reference model. A hard link is the same *mnode
// under two names.
type mnode struct {
	typ    vfs.FileType
	mode   uint32
	data   []byte // regular file
	target string // symlink
	xattrs map[string][]byte
	kids   map[string]*mnode // directory
}

func newMDir(mode uint32) *mnode {
	return &mnode{typ: vfs.TypeDir, mode: mode, xattrs: map[string][]byte{}, kids: map[string]*mnode{}}
}

// cloneTree copies a state, keeping hard links shared.
func cloneTree(root *mnode) *mnode {
	memo := map[*mnode]*mnode{}
	var cp func(n *mnode) *mnode
	cp = func(n *mnode) *mnode {
		if c, ok := memo[n]; ok {
			return c
		}
		c := &mnode{typ: n.typ, mode: n.mode, data: slices.Clone(n.data), target: n.target, xattrs: maps.Clone(n.xattrs)}
		memo[n] = c
		if n.kids != nil {
			c.kids = make(map[string]*mnode, len(n.kids))
			for name, k := range n.kids {
				c.kids[name] = cp(k)
			}
		}
		return c
	}
	return cp(root)
}

// lookup finds path p ("/" or "/a/b"); nil when absent.
func lookup(root *mnode, p string) *mnode {
	n := root
	for _, name := range strings.Split(p, "/") {
		if name == "" {
			continue
		}
		if n.typ != vfs.TypeDir {
			return nil
		}
		if n = n.kids[name]; n == nil {
			return nil
		}
	}
	return n
}

// flatten maps every path of a state ("/" included) to its node.
func flatten(root *mnode) map[string]*mnode {
	out := map[string]*mnode{"/": root}
	var walk func(p string, n *mnode)
	walk = func(p string, n *mnode) {
		for name, k := range n.kids {
			kp := joinModelPath(p, name)
			out[kp] = k
			walk(kp, k)
		}
	}
	walk("/", root)
	return out
}

func joinModelPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// below reports whether d is n or lies in n's subtree.
func below(d, n *mnode) bool {
	if d == n {
		return true
	}
	for _, k := range n.kids {
		if k.typ == vfs.TypeDir && below(d, k) {
			return true
		}
	}
	return false
}

// nameErrno is the model of the vault's name check.
func nameErrno(name string) syscall.Errno {
	switch {
	case name == "" || name == "." || name == "..":
		return syscall.EINVAL
	case len(name) > vfs.NameMax:
		return syscall.ENAMETOOLONG
	case strings.ContainsAny(name, "/\x00"):
		return syscall.EINVAL
	}
	return 0
}

type opKind int

const (
	opMkdir opKind = iota
	opCreate
	opSymlink
	opWrite
	opTruncate
	opUnlink
	opRmdir
	opRename
	opLink
	opChmod
	opSetXattr
	opRemoveXattr
	opRead
	opCopy
)

// opWeights is how often each filesystem operation is drawn.
var opWeights = map[opKind]int{
	opMkdir: 8, opCreate: 10, opSymlink: 3, opWrite: 14, opTruncate: 6, opUnlink: 6,
	opRmdir: 4, opRename: 12, opLink: 4, opChmod: 3, opSetXattr: 4, opRemoveXattr: 2, opRead: 4, opCopy: 3,
}

var opNames = map[opKind]string{
	opMkdir: "mkdir", opCreate: "create", opSymlink: "symlink", opWrite: "write", opTruncate: "truncate",
	opUnlink: "unlink", opRmdir: "rmdir", opRename: "rename", opLink: "link", opChmod: "chmod",
	opSetXattr: "setxattr", opRemoveXattr: "removexattr", opRead: "read", opCopy: "copy",
}

// fsOp is one filesystem operation. Paths name nodes that exist when the
// operation runs; names may be absent (or invalid).
type fsOp struct {
	kind   opKind
	path   string // the node operated on, or the parent directory of name
	name   string
	path2  string // rename's and link's target directory, copy's target file
	name2  string
	off    int64
	n      int  // write length
	fill   byte // write pattern; 0 writes zeros
	size   uint64
	mode   uint32
	flags  uint32
	xname  string
	target string
	want   []byte // what a read must return, set by apply
}

func (o *fsOp) String() string {
	switch o.kind {
	case opMkdir, opCreate:
		return fmt.Sprintf("%s %s %q %#o", opNames[o.kind], o.path, o.name, o.mode)
	case opSymlink:
		return fmt.Sprintf("symlink %s %q -> %q", o.path, o.name, o.target)
	case opWrite:
		return fmt.Sprintf("write %s off=%d len=%d fill=%d", o.path, o.off, o.n, o.fill)
	case opRead:
		return fmt.Sprintf("read %s off=%d len=%d", o.path, o.off, o.n)
	case opTruncate:
		return fmt.Sprintf("truncate %s %d", o.path, o.size)
	case opUnlink, opRmdir:
		return fmt.Sprintf("%s %s %q", opNames[o.kind], o.path, o.name)
	case opRename:
		return fmt.Sprintf("rename %s %q -> %s %q flags=%d", o.path, o.name, o.path2, o.name2, o.flags)
	case opLink:
		return fmt.Sprintf("link %s -> %s %q", o.path, o.path2, o.name2)
	case opCopy:
		return fmt.Sprintf("copy %s -> %s", o.path, o.path2)
	case opChmod:
		return fmt.Sprintf("chmod %s %#o", o.path, o.mode)
	case opSetXattr:
		return fmt.Sprintf("setxattr %s %s len=%d fill=%d flags=%d", o.path, o.xname, o.n, o.fill, o.flags)
	case opRemoveXattr:
		return fmt.Sprintf("removexattr %s %s", o.path, o.xname)
	}
	return "?"
}

// bytes is the data a write or setxattr stores.
func (o *fsOp) bytes() []byte {
	b := make([]byte, o.n)
	if o.fill != 0 {
		for i := range b {
			b[i] = o.fill + byte(i*7)
		}
	}
	return b
}

// apply runs the operation on the model state and returns the errno the
// vault must fail with (0: it must succeed, and the state changed).
func (o *fsOp) apply(root *mnode) syscall.Errno {
	n := lookup(root, o.path)
	switch o.kind {
	case opMkdir, opCreate, opSymlink:
		if e := nameErrno(o.name); e != 0 {
			return e
		}
		if o.kind == opSymlink && o.target == "" {
			return syscall.ENOENT
		}
		if n.typ != vfs.TypeDir {
			return syscall.ENOTDIR
		}
		if n.kids[o.name] != nil {
			return syscall.EEXIST
		}
		c := &mnode{mode: o.mode & 0o7777, xattrs: map[string][]byte{}}
		switch o.kind {
		case opMkdir:
			c = newMDir(o.mode & 0o7777)
		case opCreate:
			c.typ = vfs.TypeFile
		case opSymlink:
			c.typ, c.mode, c.target = vfs.TypeSymlink, 0o777, o.target
		}
		n.kids[o.name] = c
	case opWrite, opTruncate, opRead:
		switch n.typ {
		case vfs.TypeDir:
			return syscall.EISDIR
		case vfs.TypeSymlink:
			return syscall.EINVAL
		}
		if o.kind == opRead {
			lo := min(int(o.off), len(n.data))
			o.want = slices.Clone(n.data[lo:min(lo+o.n, len(n.data))])
			return 0
		}
		if o.kind == opTruncate {
			n.data = resize(n.data, int(o.size))
			return 0
		}
		if o.n == 0 {
			return 0
		}
		end := int(o.off) + o.n
		if end > len(n.data) {
			n.data = resize(n.data, end)
		}
		copy(n.data[o.off:], o.bytes())
	case opUnlink, opRmdir:
		if e := nameErrno(o.name); e != 0 {
			return e
		}
		if n.typ != vfs.TypeDir {
			return syscall.ENOTDIR
		}
		c := n.kids[o.name]
		switch {
		case c == nil:
			return syscall.ENOENT
		case o.kind == opRmdir && c.typ != vfs.TypeDir:
			return syscall.ENOTDIR
		case o.kind == opUnlink && c.typ == vfs.TypeDir:
			return syscall.EISDIR
		case o.kind == opRmdir && len(c.kids) > 0:
			return syscall.ENOTEMPTY
		}
		delete(n.kids, o.name)
	case opRename:
		return o.applyRename(root, n)
	case opLink:
		if e := nameErrno(o.name2); e != 0 {
			return e
		}
		if n.typ == vfs.TypeDir {
			return syscall.EPERM
		}
		d := lookup(root, o.path2)
		if d.typ != vfs.TypeDir {
			return syscall.ENOTDIR
		}
		if d.kids[o.name2] != nil {
			return syscall.EEXIST
		}
		d.kids[o.name2] = n
	case opCopy:
		d := lookup(root, o.path2)
		for _, x := range []*mnode{n, d} {
			switch x.typ {
			case vfs.TypeDir:
				return syscall.EISDIR
			case vfs.TypeSymlink:
				return syscall.EINVAL
			}
		}
		d.data = slices.Clone(n.data)
	case opChmod:
		n.mode = o.mode & 0o7777
	case opSetXattr:
		_, exists := n.xattrs[o.xname]
		if o.flags&vfs.XattrCreate != 0 && exists {
			return syscall.EEXIST
		}
		if o.flags&vfs.XattrReplace != 0 && !exists {
			return syscall.ENODATA
		}
		n.xattrs[o.xname] = o.bytes()
	case opRemoveXattr:
		if _, ok := n.xattrs[o.xname]; !ok {
			return syscall.ENODATA
		}
		delete(n.xattrs, o.xname)
	}
	return 0
}

// applyRename models rename(2) with renameat2's flags. One divergence from
// Linux is modelled as the vault does it: renaming a non-directory onto an
// ancestor directory of itself is EISDIR here, ENOTEMPTY on Linux.
func (o *fsOp) applyRename(root, od *mnode) syscall.Errno {
	if o.flags&^(vfs.RenameNoReplace|vfs.RenameExchange) != 0 || o.flags == vfs.RenameNoReplace|vfs.RenameExchange {
		return syscall.EINVAL
	}
	if e := nameErrno(o.name); e != 0 {
		return e
	}
	if e := nameErrno(o.name2); e != 0 {
		return e
	}
	nd := lookup(root, o.path2)
	if od.typ != vfs.TypeDir || nd.typ != vfs.TypeDir {
		return syscall.ENOTDIR
	}
	src, dst := od.kids[o.name], nd.kids[o.name2]
	switch {
	case src == nil:
		return syscall.ENOENT
	case o.flags&vfs.RenameExchange != 0 && dst == nil:
		return syscall.ENOENT
	case o.flags&vfs.RenameNoReplace != 0 && dst != nil:
		return syscall.EEXIST
	case dst == src:
		return 0
	case src.typ == vfs.TypeDir && below(nd, src):
		return syscall.EINVAL
	}
	if o.flags&vfs.RenameExchange != 0 {
		if dst.typ == vfs.TypeDir && below(od, dst) {
			return syscall.EINVAL
		}
		od.kids[o.name], nd.kids[o.name2] = dst, src
		return 0
	}
	if dst != nil {
		switch {
		case src.typ == vfs.TypeDir && dst.typ != vfs.TypeDir:
			return syscall.ENOTDIR
		case src.typ != vfs.TypeDir && dst.typ == vfs.TypeDir:
			return syscall.EISDIR
		case dst.typ == vfs.TypeDir && len(dst.kids) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(od.kids, o.name)
	nd.kids[o.name2] = src
	return 0
}

func resize(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n:n]
	}
	return append(b, make([]byte, n-len(b))...)
}

// run performs the operation on the vault. A failure to find a node the
// model says exists is reported without its errno, so it never passes for
// an expected error.
func (o *fsOp) run(tx *vfs.Tx) error {
	resolve := func(p string) (vfs.Ino, error) {
		a, err := tx.Resolve(p, false)
		if err != nil {
			return 0, fmt.Errorf("resolving %s, which the model holds: %v", p, err)
		}
		return a.Ino, nil
	}
	ino, err := resolve(o.path)
	if err != nil {
		return err
	}
	switch o.kind {
	case opMkdir:
		_, err = tx.Mkdir(ino, o.name, o.mode, 0, 0)
	case opCreate:
		_, err = tx.Create(ino, o.name, o.mode, 0, 0)
	case opSymlink:
		_, err = tx.Symlink(ino, o.name, o.target, 0, 0)
	case opWrite:
		var n int
		n, err = tx.Write(ino, o.off, o.bytes())
		if err == nil && n != o.n {
			err = fmt.Errorf("write returned %d, want %d", n, o.n)
		}
	case opRead:
		buf := make([]byte, o.n)
		var n int
		n, err = tx.Read(ino, o.off, buf)
		if err == nil && !bytes.Equal(buf[:n], o.want) {
			err = fmt.Errorf("read %d bytes, want %d; first difference at %d", n, len(o.want), firstDiff(buf[:n], o.want))
		}
	case opTruncate:
		size := o.size
		_, err = tx.SetAttr(ino, vfs.SetAttr{Size: &size})
	case opUnlink:
		err = tx.Unlink(ino, o.name)
	case opRmdir:
		err = tx.Rmdir(ino, o.name)
	case opRename, opLink, opCopy:
		var ino2 vfs.Ino
		if ino2, err = resolve(o.path2); err != nil {
			return err
		}
		switch o.kind {
		case opRename:
			err = tx.Rename(ino, o.name, ino2, o.name2, o.flags)
		case opLink:
			_, err = tx.Link(ino, ino2, o.name2)
		case opCopy:
			err = tx.CopyData(ino, ino2)
		}
	case opChmod:
		mode := o.mode
		_, err = tx.SetAttr(ino, vfs.SetAttr{Mode: &mode})
	case opSetXattr:
		err = tx.SetXattr(ino, o.xname, o.bytes(), o.flags)
	case opRemoveXattr:
		err = tx.RemoveXattr(ino, o.xname)
	}
	return err
}

// errnoIs reports whether err is the outcome the model expects.
func errnoIs(err error, want syscall.Errno) bool {
	if want == 0 {
		return err == nil
	}
	return errors.Is(err, want)
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return fmt.Sprintf("%s (%d)", e.Error(), int(e))
}

// Drawing operations.

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

// Vaults and checkpoints of the model.

// mvault is one vault: the open handle and its model.
type mvault struct {
	name   string
	v      *vfs.Vault
	eng    kv.Engine // the memory engine, to reopen it
	work   *mnode
	cps    map[string]*mnode
	parent *mvault // nil unless a fork
	forks  int     // live forks standing on this vault
}

type modelRun struct {
	t      *rapid.T
	engine string
	home   *registry.Home // nil for the memory engine
	vaults []*mvault
	cur    *mvault
}

var errAbort = errors.New("transaction aborted by the test")

func newModelRun(t *rapid.T, engine, tmpRoot string) *modelRun {
	r := &modelRun{t: t, engine: engine}
	mv := &mvault{name: "v", work: newMDir(0o755), cps: map[string]*mnode{}}
	var err error
	if engine == "mem" {
		mv.eng = engines.NewMemory()
		mv.v, err = vfs.Create(mv.eng, mv.name, vfs.Quota{})
	} else {
		dir, derr := os.MkdirTemp(tmpRoot, "home")
		if derr != nil {
			t.Fatal(derr)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if r.home, err = registry.Open(dir); err == nil {
			mv.v, err = r.home.Create(mv.name, registry.CreateOptions{Engine: engine})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	r.vaults = []*mvault{mv}
	r.cur = mv
	t.Cleanup(func() {
		for _, mv := range r.vaults {
			mv.v.Close()
		}
	})
	return r
}

// run draws and performs a sequence of steps, checking the vault's working
// state after each, then checks everything.
func (r *modelRun) run() {
	t := r.t
	actions := []string{"op", "op", "op", "op", "op", "op", "op", "op", "op", "op", "op", "op",
		"batch", "batch", "save", "save", "restore", "delete-cp", "switch", "compact", "reopen"}
	if r.home != nil {
		actions = append(actions, "fork", "fork", "delete-vault")
	}
	steps := rapid.IntRange(1, map[string]int{"mem": 60, "sqlite": 40}[r.engine]).Draw(t, "steps")
	for range steps {
		switch a := rapid.SampledFrom(actions).Draw(t, "action"); a {
		case "op":
			r.transaction(1)
		case "batch":
			r.transaction(rapid.IntRange(2, 5).Draw(t, "batch"))
		case "save":
			r.save()
		case "restore":
			r.restore()
		case "delete-cp":
			r.deleteCheckpoint()
		case "switch":
			r.cur = rapid.SampledFrom(r.vaults).Draw(t, "vault")
			t.Logf("switch to %s", r.cur.name)
		case "compact":
			r.compact()
		case "reopen":
			r.reopen(r.cur)
		case "fork":
			r.fork()
		case "delete-vault":
			r.deleteVault()
		}
		r.checkState(r.cur, "", r.cur.work)
	}
	for _, mv := range r.vaults {
		r.checkVault(mv)
	}
}

// transaction runs n operations in one Update. The first failing one (which
// must fail as the model says) aborts it; sometimes the test aborts it after
// all succeeded. Either way the model must stay as it was.
func (r *modelRun) transaction(n int) {
	t, mv := r.t, r.cur
	scratch := cloneTree(mv.work)
	var ops []*fsOp
	var want []syscall.Errno
	for range n {
		o := drawOp(t, scratch)
		e := o.apply(scratch)
		ops, want = append(ops, o), append(want, e)
		if e != 0 {
			break
		}
	}
	abort := want[len(want)-1] == 0 && rapid.IntRange(0, 9).Draw(t, "abort") == 0
	var mismatch string
	err := mv.v.Update(func(tx *vfs.Tx) error {
		for i, o := range ops {
			err := o.run(tx)
			if !errnoIs(err, want[i]) {
				mismatch = fmt.Sprintf("%s in %s: got %v, want %s", o, mv.name, err, errnoName(want[i]))
				return errAbort
			}
			if err != nil {
				return err
			}
		}
		if abort {
			return errAbort
		}
		return nil
	})
	for i, o := range ops {
		t.Logf("%s: %s => %s", mv.name, o, errnoName(want[i]))
	}
	if mismatch != "" {
		t.Fatalf("%s", mismatch)
	}
	last := want[len(want)-1]
	switch {
	case abort:
		t.Logf("(aborted)")
		if !errors.Is(err, errAbort) {
			t.Fatalf("aborted transaction returned %v", err)
		}
	case last != 0:
		if !errors.Is(err, last) {
			t.Fatalf("transaction failing with %s returned %v", errnoName(last), err)
		}
	case err != nil:
		t.Fatalf("transaction: %v", err)
	default:
		mv.work = scratch
	}
}

var checkpointNames = []string{"c0", "c1", "c2", "c3", "c4"}

func (r *modelRun) save() {
	t, mv := r.t, r.cur
	name := rapid.SampledFrom(append(checkpointNames, "")).Draw(t, "checkpoint")
	cp, err := mv.v.SaveCheckpoint(name, "model")
	t.Logf("%s: checkpoint save %q => %v", mv.name, name, err)
	if _, taken := mv.cps[name]; taken {
		if !errs.Is(err, errs.AlreadyExists) || !errors.Is(err, syscall.EEXIST) {
			t.Fatalf("saving checkpoint %q twice: %v", name, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("checkpoint save: %v", err)
	}
	if name != "" && cp.Name != name {
		t.Fatalf("checkpoint saved as %q, want %q", cp.Name, name)
	}
	if _, taken := mv.cps[cp.Name]; taken {
		t.Fatalf("generated checkpoint name %q is taken", cp.Name)
	}
	mv.cps[cp.Name] = cloneTree(mv.work)
}

// drawCheckpoint picks one of the vault's checkpoints, or a missing name.
func (r *modelRun) drawCheckpoint() string {
	names := slices.Sorted(maps.Keys(r.cur.cps))
	return rapid.SampledFrom(append(names, "missing")).Draw(r.t, "checkpoint")
}

func (r *modelRun) restore() {
	t, mv := r.t, r.cur
	name := r.drawCheckpoint()
	err := mv.v.RestoreCheckpoint(name)
	t.Logf("%s: checkpoint restore %q => %v", mv.name, name, err)
	cp, ok := mv.cps[name]
	if !ok {
		if !errs.Is(err, errs.CheckpointNotFound) || !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("restore of a missing checkpoint: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	mv.work = cloneTree(cp)
}

func (r *modelRun) deleteCheckpoint() {
	t, mv := r.t, r.cur
	name := r.drawCheckpoint()
	err := mv.v.DeleteCheckpoint(name)
	t.Logf("%s: checkpoint delete %q => %v", mv.name, name, err)
	if _, ok := mv.cps[name]; !ok {
		if !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("delete of a missing checkpoint: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("checkpoint delete: %v", err)
	}
	delete(mv.cps, name)
}

func (r *modelRun) compact() {
	t, mv := r.t, r.cur
	if r.home != nil && rapid.Bool().Draw(t, "through-registry") {
		cs, gs, err := r.home.Compact(mv.name)
		t.Logf("%s: registry compact => %+v %+v %v", mv.name, cs, gs, err)
		if err != nil {
			t.Fatalf("compact: %v", err)
		}
		return
	}
	cs, err := mv.v.Compact()
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	gs, err := mv.v.GC()
	t.Logf("%s: compact+gc => %+v %+v %v", mv.name, cs, gs, err)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
}

// reopen gives the vault a fresh handle. A memory engine loses its data
// when closed, so there the old handle is dropped instead.
func (r *modelRun) reopen(mv *mvault) {
	t := r.t
	t.Logf("%s: reopen", mv.name)
	var err error
	if r.home == nil {
		mv.v, err = vfs.Open(mv.eng, nil)
	} else {
		if err = mv.v.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		mv.v, err = r.home.Open(mv.name)
	}
	if err != nil {
		t.Fatalf("reopen %s: %v", mv.name, err)
	}
}

func (r *modelRun) fork() {
	t := r.t
	if len(r.vaults) >= 4 {
		return
	}
	name := ""
	for i := 1; name == ""; i++ {
		name = fmt.Sprint("f", i)
		for _, mv := range r.vaults {
			if mv.name == name {
				name = ""
			}
		}
	}
	parent := r.cur
	v, err := r.home.Fork(parent.name, name)
	t.Logf("fork %s -> %s => %v", parent.name, name, err)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	mv := &mvault{name: name, v: v, work: cloneTree(parent.work), cps: map[string]*mnode{}, parent: parent}
	parent.forks++
	r.vaults = append(r.vaults, mv)
	r.cur = mv
}

// deleteVault deletes a fork; one that has forks of its own is refused.
func (r *modelRun) deleteVault() {
	t := r.t
	var forks []*mvault
	for _, mv := range r.vaults {
		if mv.parent != nil {
			forks = append(forks, mv)
		}
	}
	if len(forks) == 0 {
		return
	}
	mv := rapid.SampledFrom(forks).Draw(t, "fork")
	if mv.forks > 0 {
		err := r.home.Delete(mv.name)
		t.Logf("delete vault %s (has forks) => %v", mv.name, err)
		if !errs.Is(err, errs.VaultHasForks) {
			t.Fatalf("delete of a vault with forks: %v", err)
		}
		return
	}
	if err := mv.v.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	err := r.home.Delete(mv.name)
	t.Logf("delete vault %s => %v", mv.name, err)
	if err != nil {
		t.Fatalf("delete vault: %v", err)
	}
	mv.parent.forks--
	r.vaults = slices.DeleteFunc(r.vaults, func(x *mvault) bool { return x == mv })
	if r.cur == mv {
		r.cur = r.vaults[0]
	}
}

// Checking.

// checkVault compares every state of a vault with the model, runs fsck,
// and checks Diff from every checkpoint (and from a fork's parent) to the
// working state.
func (r *modelRun) checkVault(mv *mvault) {
	t := r.t
	r.checkState(mv, "", mv.work)
	cps, err := mv.v.Checkpoints()
	if err != nil {
		t.Fatalf("%s: checkpoints: %v", mv.name, err)
	}
	var names []string
	for _, cp := range cps {
		names = append(names, cp.Name)
	}
	slices.Sort(names)
	if want := slices.Sorted(maps.Keys(mv.cps)); !slices.Equal(names, want) {
		t.Fatalf("%s: checkpoints %q, want %q", mv.name, names, want)
	}
	for _, name := range names {
		r.checkState(mv, name, mv.cps[name])
	}
	rep, err := mv.v.Fsck()
	if err != nil {
		t.Fatalf("%s: fsck: %v", mv.name, err)
	}
	if !rep.OK() {
		t.Fatalf("%s: fsck found problems:\n%s", mv.name, strings.Join(rep.Problems, "\n"))
	}
	for _, name := range names {
		r.checkDiff(vfs.StateRef{Vault: mv.v, Checkpoint: name}, vfs.StateRef{Vault: mv.v}, mv.cps[name], mv.work)
	}
	if mv.parent != nil {
		r.checkDiff(vfs.StateRef{Vault: mv.parent.v}, vfs.StateRef{Vault: mv.v}, mv.parent.work, mv.work)
	}
}

func (r *modelRun) checkState(mv *mvault, checkpoint string, want *mnode) {
	run := mv.v.View
	label := mv.name + " working state"
	if checkpoint != "" {
		run = func(fn func(*vfs.Tx) error) error { return mv.v.ViewAt(checkpoint, fn) }
		label = mv.name + " checkpoint " + checkpoint
	}
	if err := run(func(tx *vfs.Tx) error { return compareTree(tx, want) }); err != nil {
		r.t.Fatalf("%s differs from the model: %v", label, err)
	}
}

func (r *modelRun) checkDiff(from, to vfs.StateRef, a, b *mnode) {
	cs, err := vfs.Diff(from, to)
	if err != nil {
		r.t.Fatalf("diff: %v", err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Path+" "+string(c.Kind))
	}
	slices.Sort(got)
	want := modelDiff(a, b)
	if !slices.Equal(got, want) {
		r.t.Fatalf("diff %s@%q -> %s@%q:\n got  %q\n want %q", from.Vault.Name(), from.Checkpoint,
			to.Vault.Name(), to.Checkpoint, got, want)
	}
}

// modelDiff lists "path kind" for every path whose type, content (data,
// symlink target, xattrs) or mode differs between two states, sorted.
func modelDiff(a, b *mnode) []string {
	fa, fb := flatten(a), flatten(b)
	var out []string
	for p, na := range fa {
		nb, ok := fb[p]
		var kind vfs.ChangeKind
		switch {
		case !ok:
			kind = vfs.Deleted
		case na.typ != nb.typ:
			kind = vfs.TypeChanged
		case !bytes.Equal(na.data, nb.data) || na.target != nb.target || !maps.EqualFunc(na.xattrs, nb.xattrs, bytes.Equal):
			kind = vfs.Modified
		case na.mode != nb.mode:
			kind = vfs.ModeChanged
		default:
			continue
		}
		out = append(out, p+" "+string(kind))
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			out = append(out, p+" "+string(vfs.Added))
		}
	}
	slices.Sort(out)
	return out
}

// compareTree walks a state from the root and compares it with the model:
// names, types, modes, data, symlink targets, xattrs, link counts, hard-link
// identity and the usage counters.
func compareTree(tx *vfs.Tx, root *mnode) error {
	inoOf := map[*mnode]vfs.Ino{}
	nodeOf := map[vfs.Ino]*mnode{}
	names := map[*mnode]int{}
	var usage vfs.Usage
	var walk func(p string, ino vfs.Ino, n *mnode) error
	walk = func(p string, ino vfs.Ino, n *mnode) error {
		names[n]++
		if seen, ok := inoOf[n]; ok {
			if seen != ino {
				return fmt.Errorf("%s: inode %d, but the model's hard link is inode %d", p, ino, seen)
			}
			return nil
		}
		if other, ok := nodeOf[ino]; ok && other != n {
			return fmt.Errorf("%s: inode %d is also another file of the model", p, ino)
		}
		inoOf[n], nodeOf[ino] = ino, n
		a, err := tx.GetAttr(ino)
		if err != nil {
			return fmt.Errorf("%s: getattr: %v", p, err)
		}
		if a.Type != n.typ || a.Mode != n.mode {
			return fmt.Errorf("%s: %s mode %#o, want %s mode %#o", p, a.Type, a.Mode, n.typ, n.mode)
		}
		if ino != vfs.RootIno {
			usage.Files++
		}
		if err := compareXattrs(tx, ino, n); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		switch n.typ {
		case vfs.TypeFile:
			usage.Bytes += int64(len(n.data))
			if a.Size != uint64(len(n.data)) {
				return fmt.Errorf("%s: size %d, want %d", p, a.Size, len(n.data))
			}
			buf := make([]byte, len(n.data)+10)
			got, err := tx.Read(ino, 0, buf)
			if err != nil {
				return fmt.Errorf("%s: read: %v", p, err)
			}
			if !bytes.Equal(buf[:got], n.data) {
				return fmt.Errorf("%s: content differs (%d bytes read, want %d; first difference at %d)",
					p, got, len(n.data), firstDiff(buf[:got], n.data))
			}
		case vfs.TypeSymlink:
			target, err := tx.Readlink(ino)
			if err != nil || target != n.target {
				return fmt.Errorf("%s: readlink = %q, %v; want %q", p, target, err, n.target)
			}
		case vfs.TypeDir:
			entries, err := tx.ReadDir(ino)
			if err != nil {
				return fmt.Errorf("%s: readdir: %v", p, err)
			}
			var got []string
			subdirs := uint32(0)
			for _, e := range entries {
				got = append(got, e.Name)
				k := n.kids[e.Name]
				if k == nil {
					continue
				}
				if e.Type != k.typ {
					return fmt.Errorf("%s: entry %q says %s, want %s", p, e.Name, e.Type, k.typ)
				}
				if k.typ == vfs.TypeDir {
					subdirs++
				}
				if err := walk(joinModelPath(p, e.Name), e.Ino, k); err != nil {
					return err
				}
			}
			if want := slices.Sorted(maps.Keys(n.kids)); !slices.Equal(got, want) {
				return fmt.Errorf("%s: entries %q, want %q", p, got, want)
			}
			if a.Nlink != 2+subdirs {
				return fmt.Errorf("%s: nlink %d, want %d", p, a.Nlink, 2+subdirs)
			}
		}
		return nil
	}
	if err := walk("/", vfs.RootIno, root); err != nil {
		return err
	}
	for n, count := range names {
		if n.typ == vfs.TypeDir {
			continue
		}
		a, err := tx.GetAttr(inoOf[n])
		if err != nil {
			return err
		}
		if int(a.Nlink) != count {
			return fmt.Errorf("inode %d: nlink %d, want %d names", inoOf[n], a.Nlink, count)
		}
	}
	got, err := tx.Usage()
	if err != nil {
		return err
	}
	if got != usage {
		return fmt.Errorf("usage %+v, want %+v", got, usage)
	}
	return nil
}

func compareXattrs(tx *vfs.Tx, ino vfs.Ino, n *mnode) error {
	names, err := tx.ListXattr(ino)
	if err != nil {
		return fmt.Errorf("listxattr: %v", err)
	}
	if want := slices.Sorted(maps.Keys(n.xattrs)); !slices.Equal(names, want) {
		return fmt.Errorf("xattrs %q, want %q", names, want)
	}
	for _, name := range names {
		v, err := tx.GetXattr(ino, name)
		if err != nil || !bytes.Equal(v, n.xattrs[name]) {
			return fmt.Errorf("xattr %s = %q, %v; want %q", name, v, err, n.xattrs[name])
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
