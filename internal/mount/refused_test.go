package mount_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestRefusedWritesThroughMount checks that what the mount refuses for a
// quota changes nothing: a write(2) past max_size_mb leaves the file as
// it was, and extended attributes count against max_size_mb (ENOSPC), so
// 64 KiB values cannot fill a 1 MiB vault unseen.
func TestRefusedWritesThroughMount(t *testing.T) {
	canMount(t)
	h, name := newVault(t, "sqlite")
	setQuota(t, h, name, vfs.Quota{MaxSizeMB: 1})
	f := mountOn(t, h, name, t.TempDir(), false)
	p := filepath.Join(f.mnt, "f")
	old := randBytes(5, 512<<10)
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}

	fd, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// One FUSE request (max_write is 1 MiB, the offset page-aligned): the
	// mount sees the whole write(2).
	n, err := fd.WriteAt(randBytes(6, 1<<20), 512<<10)
	fd.Close()
	if !errors.Is(err, syscall.ENOSPC) || n != 0 {
		t.Errorf("a write past max_size_mb: wrote %d, %v; want 0, ENOSPC", n, err)
	}

	value := bytes.Repeat([]byte{'v'}, vfs.XattrValueMax)
	accepted := 0
	for i := range 32 {
		err = unix.Setxattr(p, "user.k"+string(rune('a'+i)), value, 0)
		if err != nil {
			break
		}
		accepted++
	}
	if !errors.Is(err, syscall.ENOSPC) || accepted >= 8 {
		t.Errorf("after %d attributes of 64 KiB beside 512 KiB in a 1 MiB vault: %v, want ENOSPC", accepted, err)
	}
	if err := unix.Removexattr(p, "user.ka"); accepted > 0 && err != nil {
		t.Errorf("removexattr: %v", err)
	}
	if err := unix.Setxattr(p, "user.small", []byte("s"), 0); err != nil {
		t.Errorf("a small attribute once one is removed: %v", err)
	}

	if err := f.s.Unmount(false); err != nil {
		t.Fatal(err)
	}
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got, _ := vaultFile(t, v, "/f"); !bytes.Equal(got, old) {
		t.Errorf("the vault holds %d bytes of f, want the %d written before the refused write", len(got), len(old))
	}
}
