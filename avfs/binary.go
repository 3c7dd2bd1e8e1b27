package avfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// binary is the avfs program that serves mounts: the one given with
// WithBinary, else $AGENTVFS_BIN (as the Python and npm clients), else
// `avfs` on PATH, else the running program when it is avfs. A program that
// was named but cannot be run is an error, never silently replaced.
func (h *Home) binary(op string) (string, error) {
	notFound := func(err error) error {
		return &errs.Error{Kind: errs.Kind(BinaryNotFound), Op: op, Err: err,
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

// run runs `avfs --json --home DIR ARGS...` and returns its document. A
// failure is the internal error its error document describes (the proxy
// reads its kind; the exported calls wrap it). When ctx ends the
// program gets SIGTERM, which it handles as Ctrl-C (it stops what it
// started and says so), and SIGKILL if it has not exited 5 s later; the
// error is then Interrupted.
func (h *Home) run(ctx context.Context, op string, args ...string) ([]byte, error) {
	bin, err := h.binary(op)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, op)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--json", "--home", h.reg.Dir}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "AVFS_HOME="+h.reg.Dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if runErr == nil || cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// Done, even if ctx ended as it finished (Run then reports ctx's
		// error): a mount it started must not be left unknown.
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, op)
	}
	var doc struct {
		Error   Kind   `json:"error"`
		Message string `json:"message"`
		Op      string `json:"op"`
		Path    string `json:"path"`
		CP      string `json:"checkpoint"`
		Vault   string `json:"vault"`
		Hint    string `json:"hint"`
	}
	if json.Unmarshal(stdout.Bytes(), &doc) != nil || doc.Error == "" {
		return nil, &errs.Error{Kind: errs.IoError, Op: op,
			Err: fmt.Errorf("%s: %v: %s", bin, runErr, strings.TrimSpace(stderr.String()))}
	}
	var extra map[string]any
	_ = json.Unmarshal(stdout.Bytes(), &extra)
	if doc.Path == "" {
		doc.Path = doc.CP // errors about a checkpoint name it in Path
	}
	for _, k := range []string{"error", "message", "op", "path", "checkpoint", "vault", "hint", "exit_code"} {
		delete(extra, k)
	}
	if len(extra) == 0 {
		extra = nil
	}
	e := &errs.Error{Kind: errs.Kind(doc.Error), Op: doc.Op, Path: doc.Path, Vault: doc.Vault, Hint: doc.Hint, Extra: extra}
	e.Err = errors.New(cause(e, doc.Message))
	return nil, e
}

// cause strips from a printed message what Error() adds around the cause
// (op, path and vault before it, the hint after it), so that the rebuilt
// error does not repeat them.
func cause(e *errs.Error, msg string) string {
	probe := *e
	probe.Err = errors.New("\x00")
	pre, suf, _ := strings.Cut(probe.Error(), "\x00")
	msg = strings.TrimPrefix(msg, pre)
	return strings.TrimSuffix(msg, suf)
}
