package vfs

import (
	"encoding/binary"
	"errors"
	"time"
)

// errBadRecord marks a record that does not decode: the vault is corrupt.
var errBadRecord = errors.New("malformed record")

// Ino is an inode number, stable for the life of a file and across remounts.
type Ino uint64

// RootIno is the root directory of every vault.
const RootIno Ino = 1

// FileType is the type of an inode.
type FileType uint8

// The file types a vault holds.
const (
	TypeDir FileType = iota + 1
	TypeFile
	TypeSymlink
	TypeFifo
	TypeSocket
	TypeChar
	TypeBlock
)

func (t FileType) String() string {
	switch t {
	case TypeDir:
		return "dir"
	case TypeFile:
		return "file"
	case TypeSymlink:
		return "symlink"
	case TypeFifo:
		return "fifo"
	case TypeSocket:
		return "socket"
	case TypeChar:
		return "char"
	case TypeBlock:
		return "block"
	}
	return "unknown"
}

// Attr is what stat reports about an inode. Mode holds only the permission
// bits (07777); the type is Type.
type Attr struct {
	Ino   Ino
	Type  FileType
	Mode  uint32
	Uid   uint32
	Gid   uint32
	Nlink uint32
	Size  uint64
	Rdev  uint32
	Atime time.Time
	Mtime time.Time
	Ctime time.Time
}

// link is one name of an inode: the directory holding it and the name there.
// Directories have exactly one (none for the root); files one per hard link.
type link struct {
	Parent Ino
	Name   string
}

// inode is the stored record: the attributes plus what only the model needs.
type inode struct {
	Attr
	gen    uint64 // data generation: chunk keys carry it, so truncate-to-zero is O(1)
	birth  uint64 // the vault that created the inode: with Ino, its identity across forks
	target string // symlink target
	links  []link
}

const inodeVersion = 1

// encodeInode writes the record in a fixed binary layout:
//
//	version:1 type:1 mode:4 uid:4 gid:4 nlink:4 size:8 rdev:4 gen:8 birth:8
//	atime:12 mtime:12 ctime:12 (seconds:8 nanoseconds:4 each)
//	target_len:4 target  link_count:4 (parent:8 name_len:2 name)*
func encodeInode(n *inode) []byte {
	b := make([]byte, 0, 90+len(n.target)+len(n.links)*20)
	b = append(b, inodeVersion, byte(n.Type))
	b = binary.BigEndian.AppendUint32(b, n.Mode)
	b = binary.BigEndian.AppendUint32(b, n.Uid)
	b = binary.BigEndian.AppendUint32(b, n.Gid)
	b = binary.BigEndian.AppendUint32(b, n.Nlink)
	b = binary.BigEndian.AppendUint64(b, n.Size)
	b = binary.BigEndian.AppendUint32(b, n.Rdev)
	b = binary.BigEndian.AppendUint64(b, n.gen)
	b = binary.BigEndian.AppendUint64(b, n.birth)
	for _, t := range []time.Time{n.Atime, n.Mtime, n.Ctime} {
		b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
		b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(n.target)))
	b = append(b, n.target...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(n.links)))
	for _, l := range n.links {
		b = binary.BigEndian.AppendUint64(b, uint64(l.Parent))
		b = binary.BigEndian.AppendUint16(b, uint16(len(l.Name)))
		b = append(b, l.Name...)
	}
	return b
}

// decoder reads big-endian fields and remembers the first short read.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || len(d.b) < n {
		d.bad = true
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.BigEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }
func (d *decoder) time() time.Time {
	sec := int64(d.u64())
	nsec := int64(d.u32())
	return time.Unix(sec, nsec)
}

func decodeInode(ino Ino, b []byte) (*inode, error) {
	d := decoder{b: b}
	if d.u8() != inodeVersion {
		return nil, errBadRecord
	}
	n := &inode{}
	n.Ino = ino
	n.Type = FileType(d.u8())
	n.Mode = d.u32()
	n.Uid = d.u32()
	n.Gid = d.u32()
	n.Nlink = d.u32()
	n.Size = d.u64()
	n.Rdev = d.u32()
	n.gen = d.u64()
	n.birth = d.u64()
	n.Atime, n.Mtime, n.Ctime = d.time(), d.time(), d.time()
	tl := d.u32()
	if tl > 1<<16 {
		return nil, errBadRecord
	}
	n.target = string(d.take(int(tl)))
	lc := d.u32()
	if lc > 1<<24 {
		return nil, errBadRecord
	}
	if lc > 0 {
		n.links = make([]link, 0, min(lc, 64))
	}
	for i := uint32(0); i < lc && !d.bad; i++ {
		p := Ino(d.u64())
		nl := d.u16()
		n.links = append(n.links, link{Parent: p, Name: string(d.take(int(nl)))})
	}
	if d.bad || len(d.b) != 0 || n.Type < TypeDir || n.Type > TypeBlock {
		return nil, errBadRecord
	}
	return n, nil
}

// A dentry value: child ino:8 type:1.
func encodeDentry(ino Ino, t FileType) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 9), uint64(ino)), byte(t))
}

func decodeDentry(b []byte) (Ino, FileType, error) {
	if len(b) != 9 {
		return 0, 0, errBadRecord
	}
	return Ino(binary.BigEndian.Uint64(b)), FileType(b[8]), nil
}

// layerRecord describes one layer. Usage is the state's usage as seen from
// this layer (its chain), kept current in the top layer and frozen with it.
type layerRecord struct {
	Parent  uint64    `json:"parent"` // 0: the bottom of this file's chain
	Frozen  bool      `json:"frozen"`
	Created time.Time `json:"created"`
	Bytes   int64     `json:"bytes"` // sum of regular file sizes
	Files   int64     `json:"files"` // inodes other than the root
}

const layerRecordLen = 8 + 1 + 12 + 8 + 8

func encodeLayer(l *layerRecord) []byte {
	b := make([]byte, 0, layerRecordLen)
	b = binary.BigEndian.AppendUint64(b, l.Parent)
	f := byte(0)
	if l.Frozen {
		f = 1
	}
	b = append(b, f)
	b = binary.BigEndian.AppendUint64(b, uint64(l.Created.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(l.Created.Nanosecond()))
	b = binary.BigEndian.AppendUint64(b, uint64(l.Bytes))
	return binary.BigEndian.AppendUint64(b, uint64(l.Files))
}

func decodeLayer(b []byte) (*layerRecord, error) {
	d := decoder{b: b}
	l := &layerRecord{Parent: d.u64()}
	switch d.u8() {
	case 0:
	case 1:
		l.Frozen = true
	default:
		return nil, errBadRecord
	}
	l.Created = d.time()
	l.Bytes = int64(d.u64())
	l.Files = int64(d.u64())
	if d.bad || len(d.b) != 0 {
		return nil, errBadRecord
	}
	return l, nil
}
