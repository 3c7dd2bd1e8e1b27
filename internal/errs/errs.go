// Package errs holds the typed errors of avfs: one Error type carrying a Kind
// (the stable name that the JSON contract prints) and, underneath, an errno
// for the mount. Every layer returns these, so the CLI, the mount and the
// proxy map failures the same way.
package errs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Kind is the stable, documented name of a class of failure. These strings
// are part of the JSON contract: they may be added to, never renamed.
type Kind string

// The kinds of failure.
const (
	NotFound      Kind = "NotFound"
	AlreadyExists Kind = "AlreadyExists"
	NotADirectory Kind = "NotADirectory"
	NotAFile      Kind = "NotAFile"
	NotEmpty      Kind = "NotEmpty"
	InvalidPath   Kind = "InvalidPath"
	InvalidInput  Kind = "InvalidInput"
	VaultNotFound Kind = "VaultNotFound"
	VaultExists   Kind = "VaultExists"
	NoActiveVault Kind = "NoActiveVault"
	VaultLocked   Kind = "VaultLocked"
	VaultHasForks Kind = "VaultHasForks"
	QuotaExceeded Kind = "QuotaExceeded"
	CorruptVault  Kind = "CorruptVault"
	StorageError  Kind = "StorageError"
	IoError       Kind = "IoError"
	// CheckpointNotFound is a NotFound for a named checkpoint.
	CheckpointNotFound Kind = "CheckpointNotFound"
	// UnsupportedFormat is a vault written by a newer avfs (or with a
	// feature this build does not know).
	UnsupportedFormat Kind = "UnsupportedFormat"
	// NameTooLong is a path component over 255 bytes.
	NameTooLong Kind = "NameTooLong"
	// TooManyLinks is a symlink loop or chain longer than 40 links.
	TooManyLinks Kind = "TooManyLinks"
	// CrossDevice is an operation that cannot span two vaults.
	CrossDevice Kind = "CrossDevice"
	// PermissionDenied is an operation the vault's state forbids (for
	// example writing a frozen layer).
	PermissionDenied Kind = "PermissionDenied"
	// ConfirmationRequired is a destructive command run without --yes.
	ConfirmationRequired Kind = "ConfirmationRequired"
	// Interrupted is a command stopped by a signal.
	Interrupted Kind = "Interrupted"
	// FuseUnavailable is a mount (or a proxy run, which needs one) on a
	// host without FUSE: no /dev/fuse on Linux, no macFUSE on darwin.
	FuseUnavailable Kind = "FuseUnavailable"
	// StoreUnavailable is a store behind a network (PostgreSQL) that could
	// not be reached: a wrong address, a server that is down, refused
	// credentials. The message names the store without its password.
	StoreUnavailable Kind = "StoreUnavailable"
	// Conflict is a step whose precondition the state no longer meets:
	// `proxy redo` of a run that was not undone, or of one whose vault
	// moved on since the undo. Nothing was changed.
	Conflict Kind = "Conflict"
)

// Error is the one error type avfs returns. Fields other than Kind are
// optional context.
type Error struct {
	Kind  Kind
	Op    string        // the operation: "mkdir", "vault create", ...
	Path  string        // a path inside the vault, when one is involved
	Vault string        // the vault's name, when known
	Errno syscall.Errno // what the mount returns; 0 means derive from Kind
	Hint  string        // what the user can do about it
	Err   error         // the underlying cause, if any
	// Extra is more context for the JSON error object (for example the
	// names of a vault's forks).
	Extra map[string]any
}

func (e *Error) Error() string {
	msg := string(e.Kind)
	if e.Err != nil {
		msg = e.Err.Error()
	} else if e.Errno != 0 {
		msg = e.Errno.Error()
	}
	switch {
	case e.Op != "" && e.Path != "":
		msg = fmt.Sprintf("%s %s: %s", e.Op, e.Path, msg)
	case e.Op != "":
		msg = e.Op + ": " + msg
	case e.Path != "":
		msg = e.Path + ": " + msg
	}
	if e.Vault != "" {
		msg = fmt.Sprintf("vault %q: %s", e.Vault, msg)
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap exposes both the cause and the errno, so errors.Is(err,
// syscall.ENOENT) and errors.Is(err, kv.ErrBusy) both work.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if n := e.errno(); n != 0 {
		out = append(out, n)
	}
	return out
}

func (e *Error) errno() syscall.Errno {
	if e.Errno != 0 {
		return e.Errno
	}
	return kindErrno[e.Kind]
}

var kindErrno = map[Kind]syscall.Errno{
	NotFound:           syscall.ENOENT,
	CheckpointNotFound: syscall.ENOENT,
	AlreadyExists:      syscall.EEXIST,
	NotADirectory:      syscall.ENOTDIR,
	NotAFile:           syscall.EISDIR,
	NotEmpty:           syscall.ENOTEMPTY,
	InvalidPath:        syscall.EINVAL,
	InvalidInput:       syscall.EINVAL,
	NameTooLong:        syscall.ENAMETOOLONG,
	TooManyLinks:       syscall.ELOOP,
	CrossDevice:        syscall.EXDEV,
	QuotaExceeded:      syscall.EDQUOT,
	PermissionDenied:   syscall.EPERM,
	VaultLocked:        syscall.EBUSY,
	CorruptVault:       syscall.EIO,
	StorageError:       syscall.EIO,
	IoError:            syscall.EIO,
	FuseUnavailable:    syscall.ENODEV,
	StoreUnavailable:   syscall.EIO,
}

var errnoKind = map[syscall.Errno]Kind{
	syscall.ENOENT:       NotFound,
	syscall.EEXIST:       AlreadyExists,
	syscall.ENOTDIR:      NotADirectory,
	syscall.EISDIR:       NotAFile,
	syscall.ENOTEMPTY:    NotEmpty,
	syscall.EINVAL:       InvalidInput,
	syscall.ENAMETOOLONG: NameTooLong,
	syscall.ELOOP:        TooManyLinks,
	syscall.EXDEV:        CrossDevice,
	syscall.EDQUOT:       QuotaExceeded,
	syscall.ENOSPC:       QuotaExceeded,
	syscall.EPERM:        PermissionDenied,
	syscall.EACCES:       PermissionDenied,
	syscall.EBUSY:        VaultLocked,
	syscall.ENODATA:      NotFound,
	syscall.EROFS:        PermissionDenied,
	syscall.E2BIG:        InvalidInput,
	syscall.ERANGE:       InvalidInput,
	syscall.EFBIG:        QuotaExceeded,
}

// E builds a filesystem error from an errno: the Kind follows from it.
func E(op, path string, errno syscall.Errno) *Error {
	k, ok := errnoKind[errno]
	if !ok {
		k = IoError
	}
	return &Error{Kind: k, Op: op, Path: path, Errno: errno}
}

// New builds an error of the given kind.
func New(kind Kind, op string, format string, args ...any) *Error {
	return &Error{Kind: kind, Op: op, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the Kind of err: the Kind of the first *Error in its chain,
// else a kind derived from a bare errno or storage sentinel, else IoError.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var n syscall.Errno
	if errors.As(err, &n) {
		if k, ok := errnoKind[n]; ok {
			return k
		}
	}
	switch {
	case errors.Is(err, kv.ErrBusy):
		return VaultLocked
	case errors.Is(err, kv.ErrUnavailable):
		return StoreUnavailable
	case errors.Is(err, kv.ErrNewerFormat):
		return UnsupportedFormat
	case errors.Is(err, kv.ErrCorrupt), errors.Is(err, kv.ErrForeign):
		return CorruptVault
	case errors.Is(err, kv.ErrNotFound), errors.Is(err, kv.ErrClosed), errors.Is(err, kv.ErrReadOnly):
		return StorageError
	}
	return IoError
}

// Errno maps err to the errno the mount returns. Known kinds map to their
// errno; anything unexpected becomes EIO, so the kernel never sees a Go error.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		if n := e.errno(); n != 0 {
			return n
		}
		return syscall.EIO
	}
	var n syscall.Errno
	if errors.As(err, &n) {
		return n
	}
	if errors.Is(err, kv.ErrBusy) {
		return syscall.EBUSY
	}
	return syscall.EIO
}

// Is reports whether err is an avfs error of the given kind.
func Is(err error, kind Kind) bool {
	return err != nil && KindOf(err) == kind
}

// Stopped is the Interrupted error of an operation whose context ended:
// its message is the context's cause ("interrupt signal received" when
// signal.NotifyContext ended it), and errors.Is finds both the cause and
// the context's own error (context.Canceled, context.DeadlineExceeded).
func Stopped(ctx context.Context, op string) *Error {
	return &Error{Kind: Interrupted, Op: op, Err: stopped{ctx.Err(), context.Cause(ctx)}}
}

type stopped struct{ err, cause error }

func (s stopped) Error() string {
	if s.cause != nil {
		return s.cause.Error()
	}
	return s.err.Error()
}

func (s stopped) Unwrap() []error { return []error{s.err, s.cause} }
