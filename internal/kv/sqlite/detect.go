package sqlite

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Magic is how every SQLite 3 database file begins.
const Magic = "SQLite format 3\x00"

// The database header fields Detect reads (https://sqlite.org/fileformat.html).
const (
	headerSize     = 100
	offPageSize    = 16 // u16 BE; 1 means 65536
	offChange      = 24 // u32 BE file change counter
	offPageCount   = 28 // u32 BE, valid when offValidFor == offChange
	offAppID       = 68 // u32 BE application_id
	offValidFor    = 92 // u32 BE version-valid-for
	minPageSize    = 512
	maxPageSize    = 65536
	largestPageMap = 1
)

// Detect reports whether f holds an avfs SQLite vault, without opening it
// with SQLite. It returns nil for a plausible vault, an error wrapping
// kv.ErrForeign when f is not a SQLite file or is another program's SQLite
// database, and one wrapping kv.ErrCorrupt when f starts with the SQLite
// magic but its header is truncated or inconsistent with the file's size.
func Detect(f *os.File) error {
	hdr := make([]byte, headerSize)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && err != io.EOF {
		return err
	}
	if n < len(Magic) || string(hdr[:len(Magic)]) != Magic {
		return kv.ErrForeign
	}
	if n < headerSize {
		return fmt.Errorf("%w: SQLite header truncated to %d bytes", kv.ErrCorrupt, n)
	}
	pageSize := int64(binary.BigEndian.Uint16(hdr[offPageSize:]))
	if pageSize == largestPageMap {
		pageSize = maxPageSize
	}
	if pageSize < minPageSize || pageSize > maxPageSize || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("%w: SQLite header has page size %d", kv.ErrCorrupt, pageSize)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size < pageSize {
		return fmt.Errorf("%w: SQLite file is %d bytes, shorter than one page", kv.ErrCorrupt, size)
	}
	// The header's page count is trusted only when SQLite marked it valid.
	// A non-empty WAL may still be completing the file (a checkpoint cut
	// short by a crash), so then SQLite is left to judge.
	pages := int64(binary.BigEndian.Uint32(hdr[offPageCount:]))
	valid := pages > 0 && binary.BigEndian.Uint32(hdr[offChange:]) == binary.BigEndian.Uint32(hdr[offValidFor:])
	if valid && size < pages*pageSize && !hasWAL(f.Name()) {
		return fmt.Errorf("%w: SQLite file is %d bytes, its header says %d pages of %d",
			kv.ErrCorrupt, size, pages, pageSize)
	}
	if id := binary.BigEndian.Uint32(hdr[offAppID:]); id != ApplicationID {
		return fmt.Errorf("%w: SQLite database with application_id %#x, not an avfs vault", kv.ErrForeign, id)
	}
	return nil
}

func hasWAL(path string) bool {
	fi, err := os.Stat(path + "-wal")
	return err == nil && fi.Size() > 0
}
