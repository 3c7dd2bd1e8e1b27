package mountd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// fuseDevice is the FUSE device of Linux. Tests point it elsewhere to
// simulate a host without FUSE.
var fuseDevice = "/dev/fuse"

// macFUSEHelpers are the mount helpers go-fuse runs on darwin (macFUSE's,
// then the older osxfuse's); one must exist. Tests point them elsewhere.
var macFUSEHelpers = []string{
	"/Library/Filesystems/macfuse.fs/Contents/Resources/mount_macfuse",
	"/Library/Filesystems/osxfuse.fs/Contents/Resources/mount_osxfuse",
}

// Available returns nil when this host can serve FUSE mounts, and else a
// FuseUnavailable error saying what is missing: /dev/fuse on Linux, macFUSE
// on darwin. It only looks (one stat); `avfs mount` and the proxy call it
// before they start anything, so a host without FUSE fails early and the
// same way everywhere.
func Available() error { return available(runtime.GOOS) }

func available(goos string) error {
	if goos == "darwin" {
		for _, p := range macFUSEHelpers {
			if _, err := os.Stat(p); err == nil {
				return nil
			}
		}
		return &errs.Error{Kind: errs.FuseUnavailable, Op: "mount",
			Err:  errors.New("macFUSE is not installed (no mount_macfuse)"),
			Hint: "install macFUSE (https://osxfuse.github.io/) and allow its system extension"}
	}
	const hint = "load the fuse module (modprobe fuse); in a container, pass --device /dev/fuse"
	fi, err := os.Stat(fuseDevice)
	switch {
	case err != nil:
		return &errs.Error{Kind: errs.FuseUnavailable, Op: "mount", Err: fmt.Errorf("no FUSE device: %w", err), Hint: hint}
	case fi.Mode()&fs.ModeCharDevice == 0:
		return &errs.Error{Kind: errs.FuseUnavailable, Op: "mount",
			Err: fmt.Errorf("%s is not a character device", fuseDevice), Hint: hint}
	}
	return nil
}
