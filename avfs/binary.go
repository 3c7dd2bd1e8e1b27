package avfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// binary is the avfs program that serves mounts: the one given with
// WithBinary, else $AGENTVFS_BIN (as the Python and npm clients), else
// `avfs` on PATH, else the running program when it is avfs. A program that
// was named but cannot be run is an error, never silently replaced.
func (h *Home) binary(op string) (string, error) {
	notFound := func(err error) error {
		return &errs.Error{Kind: BinaryNotFound, Op: op, Err: err,
			Hint: "install avfs on PATH, or pass avfs.WithBinary(path) to OpenHome"}
	}
	named, from := h.bin, "WithBinary"
	if named == "" {
		named, from = os.Getenv("AGENTVFS_BIN"), "$AGENTVFS_BIN"
	}
	if named != "" {
		fi, err := os.Stat(named)
		if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
			err = fmt.Errorf("%s is not an executable file", named)
		}
		if err != nil {
			return "", notFound(fmt.Errorf("the avfs program of %s: %w", from, err))
		}
		return named, nil
	}
	if p, err := exec.LookPath("avfs"); err == nil {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil && filepath.Base(exe) == "avfs" {
		return exe, nil
	}
	return "", notFound(errors.New("no avfs program: none was given (WithBinary, $AGENTVFS_BIN) and none is on PATH"))
}
