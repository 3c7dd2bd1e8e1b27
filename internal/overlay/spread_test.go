//go:build linux

package overlay

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestCacheRootSpreadsDirs: on ext4 the cache's root is a top of
// directory hierarchies, so each run dir starts in a block group of its
// own (makeRoot says why).
func TestCacheRootSpreadsDirs(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	run, err := c.Start(context.Background(), v, "spread", "")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Discard()
	var fs unix.Statfs_t
	if err := unix.Statfs(c.Root, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.EXT4_SUPER_MAGIC {
		t.Skipf("the cache is not on ext4 (filesystem magic %#x): the flag is ext2/3/4's", fs.Type)
	}
	fd, err := unix.Open(c.Root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	if flags&fsTopdirFL == 0 {
		t.Fatalf("cache root %s has flags %#x, want FS_TOPDIR_FL (%#x)", c.Root, flags, fsTopdirFL)
	}
}
