package overlay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// EnterArg is the first argument that makes avfs the entry helper of a
// user-namespace overlay run (EnterMain) instead of the command line: a
// hidden re-execution, never a command a user types.
const EnterArg = "__avfs-overlay-enter"

// Workdir is the working directory cwd (as --cwd names it) inside the
// mount at mnt: a directory that, symlinks resolved, is still in the
// mount.
func Workdir(mnt, cwd string) (string, error) {
	dir := filepath.Join(mnt, filepath.FromSlash(cwd))
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", &errs.Error{Kind: errs.NotFound, Op: "proxy exec", Path: cwd, Err: fmt.Errorf("--cwd: %w", err)}
	}
	if real != mnt && !strings.HasPrefix(real, mnt+"/") {
		return "", &errs.Error{Kind: errs.InvalidPath, Op: "proxy exec", Path: cwd, Err: fmt.Errorf("--cwd leads outside the mount, to %s", real)}
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", &errs.Error{Kind: errs.NotADirectory, Op: "proxy exec", Path: cwd, Err: fmt.Errorf("--cwd is not a directory")}
	}
	return real, nil
}

// enterFailure is what the helper writes to SetupFD.
type enterFailure struct {
	Kind    errs.Kind `json:"kind"`
	Op      string    `json:"op,omitempty"`
	Path    string    `json:"path,omitempty"`
	Message string    `json:"message"`
	Hint    string    `json:"hint,omitempty"`
}

// EnterFailed reads what the helper wrote to its setup pipe: nil when it
// wrote nothing (the command started), else the typed error it reported.
func EnterFailed(setup []byte) error {
	setup = bytes.TrimSpace(setup)
	if len(setup) == 0 {
		return nil
	}
	var f enterFailure
	if json.Unmarshal(setup, &f) != nil || f.Kind == "" {
		f = enterFailure{Kind: errs.IoError, Message: string(setup)}
	}
	if f.Op == "" {
		f.Op = "overlay enter"
	}
	return &errs.Error{Kind: f.Kind, Op: f.Op, Path: f.Path, Err: errors.New(f.Message), Hint: f.Hint}
}
