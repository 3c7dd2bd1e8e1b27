package avfs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Error is the one error type avfs returns: a Kind (the stable name the
// CLI prints as "error" in its JSON documents) and optional context. Match
// it with errors.As, or test its kind with IsKind or errors.Is:
//
//	var e *avfs.Error
//	if errors.As(err, &e) && e.Kind == avfs.VaultNotFound { ... }
//	if avfs.IsKind(err, avfs.VaultNotFound) { ... }
//	if errors.Is(err, avfs.VaultNotFound) { ... }
//
// An Error also unwraps to its cause and to an errno, so
// errors.Is(err, syscall.ENOENT) holds for NotFound errors, and
// errors.Is(err, context.Canceled) for an Interrupted call whose context
// was cancelled.
type Error struct {
	Kind  Kind
	Op    string // the operation: "mkdir", "vault create", ...
	Path  string // a path inside the vault (or a checkpoint's name), when one is involved
	Vault string // the vault's name, when known
	Hint  string // what the caller can do about it
	// Extra is more context, as the CLI's JSON error document prints it
	// (for example "forks": the names of a vault's forks).
	Extra map[string]any
	Err   error // the underlying cause, if any

	errno syscall.Errno // what a mount would return for it; 0 is none
}

func (e *Error) Error() string {
	msg := string(e.Kind)
	if e.Err != nil {
		msg = e.Err.Error()
	} else if e.errno != 0 {
		msg = e.errno.Error()
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

// Unwrap exposes the cause and the errno.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.errno != 0 {
		out = append(out, e.errno)
	}
	return out
}

// Is makes errors.Is(err, kind) true for an Error of that Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Errno is the errno a mount returns for this error (0 when it has none).
func (e *Error) Errno() syscall.Errno { return e.errno }

// Kind is the stable name of a class of failure. Kinds are part of the
// JSON contract (docs/json-contract.md): added to, never renamed. A Kind
// is also an error, so that errors.Is(err, avfs.NotFound) works.
type Kind string

func (k Kind) String() string { return string(k) }

// Error makes a Kind a target for errors.Is.
func (k Kind) Error() string { return string(k) }

// The kinds of failure.
const (
	NotFound      Kind = "NotFound"
	AlreadyExists Kind = "AlreadyExists"
	NotADirectory Kind = "NotADirectory"
	NotAFile      Kind = "NotAFile"
	NotEmpty      Kind = "NotEmpty"
	InvalidPath   Kind = "InvalidPath"
	InvalidInput  Kind = "InvalidInput"
	// NameTooLong is a path component over 255 bytes.
	NameTooLong Kind = "NameTooLong"
	// TooManyLinks is a symlink loop or a chain of more than 40 links.
	TooManyLinks Kind = "TooManyLinks"
	// CrossDevice is an operation that cannot span two vaults.
	CrossDevice Kind = "CrossDevice"
	// PermissionDenied is an operation the vault's state forbids.
	PermissionDenied Kind = "PermissionDenied"
	VaultNotFound    Kind = "VaultNotFound"
	VaultExists      Kind = "VaultExists"
	NoActiveVault    Kind = "NoActiveVault"
	// VaultLocked is a write while another writer (a read-write mount, a
	// proxy run) holds the vault.
	VaultLocked   Kind = "VaultLocked"
	VaultHasForks Kind = "VaultHasForks"
	QuotaExceeded Kind = "QuotaExceeded"
	CorruptVault  Kind = "CorruptVault"
	// UnsupportedFormat is a vault written by a newer avfs.
	UnsupportedFormat Kind = "UnsupportedFormat"
	// CheckpointNotFound is a NotFound for a named checkpoint (or a REF
	// that names none).
	CheckpointNotFound Kind = "CheckpointNotFound"
	StorageError       Kind = "StorageError"
	IoError            Kind = "IoError"
	// ConfirmationRequired is a destructive CLI command run without --yes.
	ConfirmationRequired Kind = "ConfirmationRequired"
	// Interrupted is a call stopped by the end of its context (or a
	// signal to the avfs program it ran).
	Interrupted Kind = "Interrupted"
	// FuseUnavailable: the host has no FUSE (no /dev/fuse on Linux, no
	// macFUSE on macOS), so nothing can be mounted or run through the proxy.
	FuseUnavailable Kind = "FuseUnavailable"
	// StoreUnavailable is a networked store (PostgreSQL) that could not be
	// reached.
	StoreUnavailable Kind = "StoreUnavailable"

	// Kinds of the mount.
	NotMounted  Kind = "NotMounted"
	MountBusy   Kind = "MountBusy"
	MountFailed Kind = "MountFailed"

	// Kinds of the proxy.
	PolicyDenied     Kind = "PolicyDenied"
	ApprovalRequired Kind = "ApprovalRequired"
	ApprovalRejected Kind = "ApprovalRejected"
	ApprovalExpired  Kind = "ApprovalExpired"
	ApprovalUsed     Kind = "ApprovalUsed"
	ApprovalMismatch Kind = "ApprovalMismatch"
	// ApprovalForged: an Approval whose record was not approved by
	// `avfs proxy approve` (created or edited on disk).
	ApprovalForged Kind = "ApprovalForged"
	// ApprovalFromRun: approve or reject called from inside a proxy run.
	ApprovalFromRun Kind = "ApprovalFromRun"
	// IsolationUnavailable: Isolate "on" where the kernel isolation cannot
	// be made (no bubblewrap, user namespaces refused); nothing ran.
	IsolationUnavailable Kind = "IsolationUnavailable"

	// BinaryNotFound is a mount or a proxy run that needs the avfs program
	// (mounts are served by their own avfs process) when none was found:
	// not given with WithBinary, not on PATH, and not the running program.
	// Only this package returns it; the CLI never prints it.
	BinaryNotFound Kind = "BinaryNotFound"
)

// KindOf returns the Kind of err ("" for nil): the kind of the first
// *Error in its chain, else one derived from a bare errno, else IoError.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Kind(errs.KindOf(err))
}

// IsKind reports whether err is an avfs error of the given kind.
func IsKind(err error, kind Kind) bool { return err != nil && KindOf(err) == kind }

// wrapErr is the boundary of the package's errors: whatever the layers
// below return becomes an *Error, with its kind, context, cause and errno.
func wrapErr(err error) error {
	if err == nil {
		return nil
	}
	var own *Error
	if errors.As(err, &own) {
		return err
	}
	var ie *errs.Error
	if !errors.As(err, &ie) {
		e := &Error{Kind: Kind(errs.KindOf(err)), Err: err}
		_ = errors.As(err, &e.errno)
		return e
	}
	e := &Error{Kind: Kind(ie.Kind), Op: ie.Op, Path: ie.Path, Vault: ie.Vault, Hint: ie.Hint, Extra: ie.Extra, Err: ie.Err}
	if error(ie) != err {
		// Wrapped on the way up: the whole text is the cause.
		e = &Error{Kind: Kind(ie.Kind), Extra: ie.Extra, Err: err}
	}
	_ = errors.As(ie, &e.errno)
	return e
}

// stopped is the Interrupted error of a call whose ctx has ended, or nil.
func stopped(ctx context.Context, op string) error {
	if ctx.Err() == nil {
		return nil
	}
	return wrapErr(errs.Stopped(ctx, op))
}
