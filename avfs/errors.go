package avfs

import (
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// Error is the one error type avfs returns: a Kind (the stable name the
// CLI prints as "error" in its JSON documents) and optional context. Match
// it with errors.As, or test its kind with IsKind:
//
//	var e *avfs.Error
//	if errors.As(err, &e) && e.Kind == avfs.VaultNotFound { ... }
//	if avfs.IsKind(err, avfs.VaultNotFound) { ... }
//
// An Error also unwraps to its cause and to an errno, so
// errors.Is(err, syscall.ENOENT) holds for NotFound errors.
type Error = errs.Error

// Kind is the stable name of a class of failure. Kinds are part of the
// JSON contract (docs/json-contract.md): added to, never renamed.
type Kind = errs.Kind

// The kinds of failure.
const (
	NotFound             = errs.NotFound
	AlreadyExists        = errs.AlreadyExists
	NotADirectory        = errs.NotADirectory
	NotAFile             = errs.NotAFile
	NotEmpty             = errs.NotEmpty
	InvalidPath          = errs.InvalidPath
	InvalidInput         = errs.InvalidInput
	NameTooLong          = errs.NameTooLong
	TooManyLinks         = errs.TooManyLinks
	CrossDevice          = errs.CrossDevice
	PermissionDenied     = errs.PermissionDenied
	VaultNotFound        = errs.VaultNotFound
	VaultExists          = errs.VaultExists
	NoActiveVault        = errs.NoActiveVault
	VaultLocked          = errs.VaultLocked
	VaultHasForks        = errs.VaultHasForks
	QuotaExceeded        = errs.QuotaExceeded
	CorruptVault         = errs.CorruptVault
	UnsupportedFormat    = errs.UnsupportedFormat
	CheckpointNotFound   = errs.CheckpointNotFound
	StorageError         = errs.StorageError
	IoError              = errs.IoError
	ConfirmationRequired = errs.ConfirmationRequired
	Interrupted          = errs.Interrupted
	// FuseUnavailable: the host has no FUSE (no /dev/fuse on Linux, no
	// macFUSE on macOS), so nothing can be mounted or run through the proxy.
	FuseUnavailable = errs.FuseUnavailable

	// Kinds of the mount.
	NotMounted  = mountd.NotMounted
	MountBusy   = mountd.MountBusy
	MountFailed = mountd.MountFailed

	// Kinds of the proxy.
	PolicyDenied     = proxy.PolicyDenied
	ApprovalRequired = proxy.ApprovalRequired
	ApprovalRejected = proxy.ApprovalRejected
	ApprovalExpired  = proxy.ApprovalExpired
	ApprovalUsed     = proxy.ApprovalUsed
	ApprovalMismatch = proxy.ApprovalMismatch
	// ApprovalForged: an --approval whose record was not approved by
	// `avfs proxy approve` (created or edited on disk).
	ApprovalForged = proxy.ApprovalForged
	// ApprovalFromRun: approve or reject called from inside a proxy run.
	ApprovalFromRun = proxy.ApprovalFromRun
	// IsolationUnavailable: Isolate "on" where the kernel isolation cannot
	// be made (no bubblewrap, user namespaces refused); nothing ran.
	IsolationUnavailable = sandbox.Unavailable
)

// BinaryNotFound is a mount or a proxy run that needs the avfs program
// (mounts are served by their own avfs process) when none was found: not
// given with WithBinary, not on PATH, and not the running program. Only
// this package returns it; the CLI never prints it.
const BinaryNotFound Kind = "BinaryNotFound"

// KindOf returns the Kind of err ("" for nil): the kind of the first
// *Error in its chain, else one derived from a bare errno, else IoError.
func KindOf(err error) Kind { return errs.KindOf(err) }

// IsKind reports whether err is an avfs error of the given kind.
func IsKind(err error, kind Kind) bool { return errs.Is(err, kind) }
