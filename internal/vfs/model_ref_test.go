package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The reference model: a plain tree of nodes and what each operation does to it.

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
