//go:build linux

package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyUpperKeepsEverything: a bounded run's upper, copied off its
// tmpfs into the cache, keeps every name, type, mode, owner, time, xattr,
// hard link, whiteout and overlay marker.
func TestCopyUpperKeepsEverything(t *testing.T) {
	needRoot(t)
	src := filepath.Join(t.TempDir(), "rw")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mountBound(src, 64<<20); err != nil {
		t.Fatal(err)
	}
	defer Unmount(src)
	upper := filepath.Join(src, "upper")
	sampleTree(t, upper)
	if err := unix.Mknod(filepath.Join(upper, "whiteout"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(filepath.Join(upper, "gone"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "tree")
	if err := copyUpper(upper, dst); err != nil {
		t.Fatal(err)
	}
	if d := diffLines(snapshot(t, upper, snapOpts{times: true}), snapshot(t, dst, snapOpts{times: true})); d != "" {
		t.Errorf("the copy differs:\n%s", d)
	}
	if v, err := getXattr(filepath.Join(dst, "gone"), "trusted.overlay.opaque"); err != nil || string(v) != "y" {
		t.Errorf("opaque marker of the copy: %q %v", v, err)
	}
}
