// Package fsutil holds the few file-system steps every file-backed engine
// shares: creating a vault file exactly once, making its name durable, and
// opening an existing one without trusting what sits at its name.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/kv"
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

// OpenRegular opens path for reading and checks that it is a regular file.
// The open does not block: a FIFO left where a vault file should be would
// otherwise wait for a writer forever, deaf to signals. Anything but a
// regular file gives an error wrapping kv.ErrForeign; a missing one wraps
// os.ErrNotExist.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not a regular file (%s)", path, kv.ErrForeign, typeName(fi.Mode()))
	}
	return f, nil
}

// typeName names the type of a file that is not a regular one.
func typeName(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}
