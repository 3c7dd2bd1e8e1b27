package mountd

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// TestAvailable simulates hosts with and without FUSE through the paths
// Available looks at. (Not parallel: it changes package variables.)
func TestAvailable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	oldDev, oldHelpers := fuseDevice, macFUSEHelpers
	t.Cleanup(func() { fuseDevice, macFUSEHelpers = oldDev, oldHelpers })

	wantUnavailable := func(t *testing.T, err error) {
		t.Helper()
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.FuseUnavailable {
			t.Fatalf("got %v, want a FuseUnavailable error", err)
		}
		if !errors.Is(err, syscall.ENODEV) || e.Error() == "" || e.Hint == "" {
			t.Errorf("%v: want errno ENODEV, a message and a hint", err)
		}
	}

	t.Run("linux/no device", func(t *testing.T) {
		fuseDevice = filepath.Join(dir, "missing")
		err := available("linux")
		wantUnavailable(t, err)
	})
	t.Run("linux/not a device", func(t *testing.T) {
		fuseDevice = plain
		wantUnavailable(t, available("linux"))
	})
	t.Run("linux/device", func(t *testing.T) {
		fuseDevice = "/dev/null" // a character device, as /dev/fuse is
		if err := available("linux"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("darwin/no macFUSE", func(t *testing.T) {
		macFUSEHelpers = []string{filepath.Join(dir, "mount_macfuse")}
		wantUnavailable(t, available("darwin"))
	})
	t.Run("darwin/macFUSE", func(t *testing.T) {
		macFUSEHelpers = []string{filepath.Join(dir, "mount_macfuse"), plain}
		if err := available("darwin"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("this host", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("compares with /dev/fuse")
		}
		fuseDevice, macFUSEHelpers = oldDev, oldHelpers
		_, statErr := os.Stat(oldDev)
		if err := Available(); (err == nil) != (statErr == nil) {
			t.Errorf("Available() = %v, but stat %s: %v", err, oldDev, statErr)
		}
	})
}
