package sqlite

import (
	"os"
	"syscall"
)

// datasync makes f's data durable, and the metadata needed to read it
// back (its size, its blocks), but not its times: SQLite syncs its own
// files the same way on Linux. For a log that is rewritten in place, an
// fsync would also commit the file system's journal for the new mtime of
// every write.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
