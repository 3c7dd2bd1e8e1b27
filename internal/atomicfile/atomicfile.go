// Package atomicfile replaces small files so that a crash leaves either the
// old content or the new, never a torn or empty file, and so that a
// replacement that was reported done is on the disk. It is the one way
// avfs replaces a file outside a vault: run records, the current-vault
// pointer.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data, mode perm: it writes a
// temporary file beside it, fsyncs it, closes it (checking the error,
// where NFS and FUSE report a failed write), renames it over path and
// fsyncs the directory, so that the new name survives a crash too. An
// error before the rename leaves path as it was and removes the
// temporary file; an error syncing the directory comes after the new
// content is in place, which a crash may then undo. The error wraps the
// *os.PathError or *os.LinkError of the step that failed.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs directory dir, which makes the names created, renamed or
// removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
