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
// ctime this close to its own start (racy) is not trusted, and the next
// Persist ingests anyway.
//
// The window is two ticks of that clock (CLOCK_REALTIME_COARSE's
// resolution: 8 ms at HZ=250): a write after the walk began is stamped
// later than one tick before its start. 50 ms where the resolution cannot
// be read. A wider window only makes more names racy, and each costs: a
// git round's last writes were all within 50 ms of the summary's ingest,
// so the next run re-read them (a warm round's checkpoint stage 5-8 ms).
var racyWindow = func() time.Duration {
	var ts unix.Timespec
	if unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &ts) != nil || ts.Nano() <= 0 || ts.Nano() > int64(25*time.Millisecond) {
		return 50 * time.Millisecond
	}
	return 2 * time.Duration(ts.Nano())
}()

// racy reports whether a name whose ctime is ctime, met by a walk that
// started at start, may change without its ctime moving. A filesystem
// that keeps whole seconds (ctime's nanoseconds 0: ext4 with small
// inodes, FAT) stamps every write of one second alike: a second's window.
func racy(ctime unix.Timespec, start time.Time) bool {
	w := racyWindow
	if ctime.Nsec == 0 {
		w += time.Second
	}
	return time.Unix(ctime.Sec, ctime.Nsec).After(start.Add(-w))
}

// upperPrint fingerprints the tree at dir; ok is false when the walk
// failed or saw a racy ctime.
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
		if racy(st.Ctim, start) {
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
