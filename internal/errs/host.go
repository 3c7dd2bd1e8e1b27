package errs

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// hostKinds are the kinds a host failure keeps: each describes the path
// the user named (an import source that is missing, an export target that
// exists). Every other host errno is IoError: a full host disk is not the
// vault's QuotaExceeded, nor is a host EACCES the PermissionDenied that the
// vault's own state raises.
var hostKinds = map[syscall.Errno]Kind{
	syscall.ENOENT:       NotFound,
	syscall.EEXIST:       AlreadyExists,
	syscall.ENOTDIR:      NotADirectory,
	syscall.EISDIR:       NotAFile,
	syscall.ENAMETOOLONG: NameTooLong,
	syscall.ELOOP:        TooManyLinks,
}

// Host types the failure err of a system call on the host file hostPath
// (import and export, not the vault file): an avfs error in err is kept,
// anything else gets the kind from hostKinds, else IoError, with the errno
// and the path in the JSON error object ("errno", "host_path").
func Host(op, hostPath string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	out := &Error{Kind: IoError, Op: op, Err: err, Extra: map[string]any{"host_path": hostPath}}
	var n syscall.Errno
	if errors.As(err, &n) {
		out.Errno = n
		out.Extra["errno"] = unix.ErrnoName(n)
		if k, ok := hostKinds[n]; ok {
			out.Kind = k
		}
	}
	return out
}
