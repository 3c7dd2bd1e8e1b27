package bolt

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Magic is the u32 bbolt writes at MagicOffset of its two meta pages.
const Magic = 0xED0CDAED

// The layout of a bbolt meta page, from go.etcd.io/bbolt/internal/common
// (page.go, meta.go): a 16-byte page header (id u64, flags u16, count u16,
// overflow u32), then the meta fields. bbolt writes them in the machine's
// byte order; every platform avfs supports is little-endian.
const (
	MagicOffset   = 16
	offVersion    = 20 // u32, must be 2
	offPageSize   = 24 // u32
	offRoot       = 32 // u64 root bucket page
	offFreelist   = 48 // u64
	offPgid       = 56 // u64 high-water mark: pages [0, pgid) exist
	offTxid       = 64 // u64
	offChecksum   = 72 // u64 FNV-64a of bytes [16, 72)
	metaEnd       = 80
	boltVersion   = 2
	noFreelist    = ^uint64(0)
	minPageSize   = 512
	maxPageSize   = 1 << 20
	probePageSize = 4096 // where meta 1 sits when meta 0 cannot tell
)

var le = binary.LittleEndian

type meta struct {
	pageSize, root, freelist, pgid, txid uint64
}

// readMeta reads and validates the meta page at off.
func readMeta(f io.ReaderAt, off int64) (meta, error) {
	buf := make([]byte, metaEnd)
	if n, err := f.ReadAt(buf, off); n < metaEnd {
		return meta{}, fmt.Errorf("meta page at %d truncated (%d bytes, %v)", off, n, err)
	}
	if le.Uint32(buf[MagicOffset:]) != Magic {
		return meta{}, fmt.Errorf("meta page at %d: bad magic", off)
	}
	if v := le.Uint32(buf[offVersion:]); v != boltVersion {
		return meta{}, fmt.Errorf("meta page at %d: version %d", off, v)
	}
	h := fnv.New64a()
	h.Write(buf[MagicOffset:offChecksum])
	if h.Sum64() != le.Uint64(buf[offChecksum:]) {
		return meta{}, fmt.Errorf("meta page at %d: bad checksum", off)
	}
	m := meta{
		pageSize: uint64(le.Uint32(buf[offPageSize:])),
		root:     le.Uint64(buf[offRoot:]),
		freelist: le.Uint64(buf[offFreelist:]),
		pgid:     le.Uint64(buf[offPgid:]),
		txid:     le.Uint64(buf[offTxid:]),
	}
	if m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return meta{}, fmt.Errorf("meta page at %d: page size %d", off, m.pageSize)
	}
	if m.pgid < 4 || m.root < 2 || m.root >= m.pgid || (m.freelist != noFreelist && m.freelist >= m.pgid) {
		return meta{}, fmt.Errorf("meta page at %d: page ids out of range", off)
	}
	return m, nil
}

// Detect reports whether f holds a bbolt database, without handing it to
// bbolt (which would fault on a truncated file). It returns nil for a
// plausible database, an error wrapping kv.ErrForeign when f does not
// start like one, and one wrapping kv.ErrCorrupt when it does but neither
// meta page is valid or the file is shorter than the meta page says.
// Whether the database is an avfs vault (has its bucket) only Open tells.
func Detect(f *os.File) error {
	var magic [4]byte
	if n, _ := f.ReadAt(magic[:], MagicOffset); n < len(magic) || le.Uint32(magic[:]) != Magic {
		return kv.ErrForeign
	}
	m0, err0 := readMeta(f, 0)
	off1 := int64(probePageSize)
	if err0 == nil {
		off1 = int64(m0.pageSize)
	}
	m1, err1 := readMeta(f, off1)
	var m meta
	switch {
	case err0 != nil && err1 != nil:
		return fmt.Errorf("%w: bbolt: %v; %v", kv.ErrCorrupt, err0, err1)
	case err1 != nil || (err0 == nil && m0.txid >= m1.txid):
		m = m0
	default:
		m = m1
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// bbolt grows the file before it commits pages past the old end, so a
	// file shorter than the high-water mark has lost its tail.
	if need := m.pgid * m.pageSize; uint64(fi.Size()) < need {
		return fmt.Errorf("%w: bbolt file is %d bytes, its meta page needs %d", kv.ErrCorrupt, fi.Size(), need)
	}
	return nil
}
