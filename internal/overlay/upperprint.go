//go:build linux

package overlay

import (
	"crypto/sha256"
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A live overlay mount is asked to persist before every read of its
// vault (mountd.Persist): ingesting an unchanged upper again would cost a
// hash of every file it holds for each `avfs cat`. upperPrint is what
// says the upper did not change since the last ingest: a hash of every
// name's path, inode, mode, size and ctime (which moves on every write,
// chmod, xattr, link and rename), like git's index stat data.
//
// As git's "racy" check: the kernel stamps ctime from a coarse clock, so
// a write just after a walk may leave the same ctime. A walk that saw a
// ctime this close to its own start is not trusted, and the next Persist
// ingests anyway.
const racyWindow = 50 * time.Millisecond

// upperPrint fingerprints the tree at dir; ok is false when the walk
// failed or saw a ctime within racyWindow of its start.
func upperPrint(dir string) (sum [32]byte, ok bool) {
	start := time.Now()
	h := sha256.New()
	var buf [8 * 6]byte
	ok = true
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		ctime := time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
		if ctime.After(start.Add(-racyWindow)) {
			ok = false
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel))
		binary.LittleEndian.PutUint64(buf[0:], st.Ino)
		binary.LittleEndian.PutUint64(buf[8:], uint64(st.Mode))
		binary.LittleEndian.PutUint64(buf[16:], uint64(st.Size))
		binary.LittleEndian.PutUint64(buf[24:], uint64(st.Ctim.Sec))
		binary.LittleEndian.PutUint64(buf[32:], uint64(st.Ctim.Nsec))
		binary.LittleEndian.PutUint64(buf[40:], uint64(st.Nlink))
		h.Write(buf[:])
		return nil
	})
	if err != nil {
		return sum, false
	}
	copy(sum[:], h.Sum(nil))
	return sum, ok
}
