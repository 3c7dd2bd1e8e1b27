// Package fsutil holds the few file-system steps every file-backed engine
// shares: creating a vault file exactly once, and making its name durable.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// FileMode is the mode of every vault file: vaults hold user data, so only
// the owner may read them.
const FileMode = 0o600

// CreateNew creates an empty file at path with FileMode. It fails with an
// error wrapping os.ErrExist when path exists, so two creators never both
// believe they own a vault.
func CreateNew(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return err
	}
	return f.Close()
}

// WriteNew creates path exactly once, as CreateNew, with content data, and
// makes both the content and the name durable.
func WriteNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = SyncDir(path)
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// SyncDir fsyncs the directory holding path, so a newly created file's
// directory entry survives a crash along with its contents.
func SyncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	return nil
}

// Abs returns the absolute, cleaned form of path: engines store it so that
// Path() and error messages name the file the same way wherever they are
// used from.
func Abs(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("empty path")
	}
	return filepath.Abs(path)
}
