//go:build !unix

package engines

import (
	"os"
	"path/filepath"
)

// fileKey identifies a file by its absolute, cleaned path where the
// platform offers no device and inode numbers.
type fileKey struct {
	path string
}

func fileID(path string) (fileKey, error) {
	if _, err := os.Stat(path); err != nil {
		return fileKey{}, err
	}
	abs, err := filepath.Abs(path)
	return fileKey{path: abs}, err
}
