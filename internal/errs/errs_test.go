package errs_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

func TestKindsAndErrnos(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		kind  errs.Kind
		errno syscall.Errno
	}{
		{"errno", errs.E("mkdir", "/a", syscall.EEXIST), errs.AlreadyExists, syscall.EEXIST},
		{"wrapped", fmt.Errorf("ctx: %w", errs.E("rmdir", "/d", syscall.ENOTEMPTY)), errs.NotEmpty, syscall.ENOTEMPTY},
		{"kind only", errs.New(errs.VaultNotFound, "open", "no vault"), errs.VaultNotFound, syscall.EIO},
		{"quota with its errno", &errs.Error{Kind: errs.QuotaExceeded, Errno: syscall.ENOSPC}, errs.QuotaExceeded, syscall.ENOSPC},
		{"bare errno", syscall.ENOENT, errs.NotFound, syscall.ENOENT},
		{"busy engine", fmt.Errorf("x: %w", kv.ErrBusy), errs.VaultLocked, syscall.EBUSY},
		{"corrupt engine", kv.ErrCorrupt, errs.CorruptVault, syscall.EIO},
		{"unreachable store", fmt.Errorf("x: %w", kv.ErrUnavailable), errs.StoreUnavailable, syscall.EIO},
		{"store from a newer avfs", fmt.Errorf("x: %w", kv.ErrNewerFormat), errs.UnsupportedFormat, syscall.EIO},
		{"unknown", errors.New("surprise"), errs.IoError, syscall.EIO},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errs.KindOf(c.err); got != c.kind {
				t.Errorf("KindOf = %s, want %s", got, c.kind)
			}
			if got := errs.Errno(c.err); got != c.errno {
				t.Errorf("Errno = %v, want %v", got, c.errno)
			}
		})
	}
	if errs.KindOf(nil) != "" || errs.Errno(nil) != 0 {
		t.Error("nil error has a kind or errno")
	}
}

func TestErrorUnwrapsCauseAndErrno(t *testing.T) {
	cause := errors.New("disk on fire")
	err := &errs.Error{Kind: errs.StorageError, Op: "write", Path: "/f", Vault: "v", Err: cause, Hint: "try later"}
	if !errors.Is(err, cause) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("%v does not unwrap to its cause and errno", err)
	}
	if got, want := err.Error(), `vault "v": write /f: disk on fire (try later)`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
