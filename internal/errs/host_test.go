package errs_test

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

func TestHostErrorsAreNotVaultErrors(t *testing.T) {
	cases := []struct {
		err   error
		kind  errs.Kind
		errno string
	}{
		{syscall.ENOSPC, errs.IoError, "ENOSPC"},
		{syscall.EDQUOT, errs.IoError, "EDQUOT"},
		{syscall.EFBIG, errs.IoError, "EFBIG"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, errs.IoError, "EACCES"},
		{syscall.EROFS, errs.IoError, "EROFS"},
		{fmt.Errorf("write: %w", syscall.ENOENT), errs.NotFound, "ENOENT"},
		{syscall.EEXIST, errs.AlreadyExists, "EEXIST"},
		{fmt.Errorf("no errno"), errs.IoError, ""},
	}
	for _, c := range cases {
		err := errs.Host("export", "/host/p", c.err)
		if errs.KindOf(err) != c.kind {
			t.Errorf("Host(%v): kind %s, want %s", c.err, errs.KindOf(err), c.kind)
		}
		e := err.(*errs.Error)
		if e.Extra["host_path"] != "/host/p" {
			t.Errorf("Host(%v): host_path %v", c.err, e.Extra["host_path"])
		}
		if got, _ := e.Extra["errno"].(string); got != c.errno {
			t.Errorf("Host(%v): errno %q, want %q", c.err, got, c.errno)
		}
	}
	typed := errs.E("write", "/v", syscall.ENOSPC)
	if err := errs.Host("export", "/h", typed); err != typed {
		t.Errorf("Host changed an avfs error: %v", err)
	}
	if errs.Host("export", "/h", nil) != nil {
		t.Error("Host(nil) is not nil")
	}
}
