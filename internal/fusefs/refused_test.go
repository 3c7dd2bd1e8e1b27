package fusefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/mountd"
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
	p := filepath.Join(f.Mnt, "f")
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
	// The vault is full (less than 64 KiB left): a value made smaller,
	// though larger than what is left, still fits.
	if err := unix.Setxattr(p, "user.kb", value[:vfs.XattrValueMax-36], 0); accepted > 1 && err != nil {
		t.Errorf("shrinking an attribute in a full vault: %v", err)
	}
	if err := unix.Removexattr(p, "user.ka"); accepted > 0 && err != nil {
		t.Errorf("removexattr: %v", err)
	}
	if err := unix.Setxattr(p, "user.small", []byte("s"), 0); err != nil {
		t.Errorf("a small attribute once one is removed: %v", err)
	}

	if err := f.S.Unmount(false); err != nil {
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

// lockedBuffer collects a mount's log.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDamagedChunkThroughMount checks that a byte flipped inside a stored
// chunk is EIO through the mount, at every read and for the edit of a
// part of that chunk, never the wrong bytes, and that the mount logs it
// once.
func TestDamagedChunkThroughMount(t *testing.T) {
	canMount(t)
	h, name := newVault(t, "sqlite")
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	err = v.Update(func(tx *vfs.Tx) error {
		_, err := tx.WriteFile("/f", randBytes(8, 100<<10), 0o644)
		return err
	})
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engines.Open(h.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Update(func(tx kv.Tx) error {
		var key, val []byte
		err := tx.Scan([]byte{'C'}, []byte{'D'}, func(k, v []byte) (bool, error) {
			key, val = slices.Clone(k), slices.Clone(v)
			return false, nil
		})
		if err != nil || key == nil {
			return fmt.Errorf("no chunk to damage: %v", err)
		}
		val[len(val)/2] ^= 1
		return tx.Put(key, val)
	})
	eng.Close()
	if err != nil {
		t.Fatal(err)
	}

	var logs lockedBuffer
	s := mountd.New(mountd.Options{Home: h, Vault: name, Mountpoint: t.TempDir(), Log: &logs})
	if err := s.Mount(); err != nil {
		t.Fatal(err)
	}
	defer unmountEventually(t, s)
	p := filepath.Join(s.Mountpoint(), "f")
	for i := range 3 {
		if b, err := os.ReadFile(p); !errors.Is(err, syscall.EIO) {
			t.Fatalf("read %d of a damaged file: %d bytes, %v; want EIO", i, len(b), err)
		}
	}
	fd, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := fd.WriteAt([]byte("x"), 10)
	serr := fd.Sync()
	fd.Close()
	if !errors.Is(werr, syscall.EIO) && !errors.Is(serr, syscall.EIO) {
		t.Errorf("editing a damaged chunk: write %v, fsync %v; want EIO", werr, serr)
	}
	if n := strings.Count(logs.String(), "does not match its hash"); n != 1 {
		t.Errorf("the damage was logged %d times, want once:\n%s", n, logs.String())
	}
}
