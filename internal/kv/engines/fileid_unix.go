//go:build unix

package engines

import (
	"os"
	"syscall"
)

// fileKey identifies a file independent of the path it was reached by.
type fileKey struct {
	dev, ino uint64
}

func fileID(path string) (fileKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileKey{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}
