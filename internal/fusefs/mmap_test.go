package fusefs_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// mapping is a memory mapping of a file that a failing test still unmaps,
// so the mount is not left busy.
type mapping struct {
	b []byte
}

func mmapFile(t *testing.T, fd *os.File, size, prot, flags int) *mapping {
	t.Helper()
	b, err := unix.Mmap(int(fd.Fd()), 0, size, prot, flags)
	if err != nil {
		t.Fatalf("mmap %s: %v", fd.Name(), err)
	}
	m := &mapping{b: b}
	t.Cleanup(func() {
		if m.b != nil {
			_ = unix.Munmap(m.b)
		}
	})
	return m
}

func (m *mapping) unmap(t *testing.T) {
	t.Helper()
	if err := unix.Munmap(m.b); err != nil {
		t.Fatalf("munmap: %v", err)
	}
	m.b = nil
}

// poke writes b at off through the mapping and into want.
func (m *mapping) poke(want []byte, off int, b string) {
	copy(m.b[off:], b)
	copy(want[off:], b)
}

func openRW(t *testing.T, p string) *os.File {
	t.Helper()
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	return fd
}

// The mappings below are made by the test process, so the mount is served
// by another process (cliMount): a page fault on a mapping of the mount
// blocks its thread outside any system call, and a Go process serving the
// mount itself can then deadlock, its garbage collector waiting for that
// thread while the thread waits for the server.

// cliUnmount unmounts a mount made with the command line and waits for
// its serving process to be gone, so the vault holds what it persisted.
func cliUnmount(t *testing.T, home, mnt string) {
	t.Helper()
	if code, doc := avfs(t, home, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %v", doc)
	}
}

// openVault opens vault v of home for reading; it is closed at the end of
// the test.
func openVault(t *testing.T, home string) *vfs.Vault {
	t.Helper()
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// TestMmapShared writes files through shared writable mappings and checks
// that the bytes reach the vault: with msync, without msync (the file
// closed while the mapping lives on, then unmapped), and into a file grown
// with ftruncate. The vault is read after the unmount and again through a
// new mount, where private mappings read the right bytes and keep their
// own writes to themselves.
func TestMmapShared(t *testing.T) {
	home, mnt, _ := cliMount(t)
	want := map[string][]byte{}
	const rw = unix.PROT_READ | unix.PROT_WRITE

	// msync'd.
	synced := randBytes(20, 2*vfs.ChunkSize+5000)
	if err := writeSynced(filepath.Join(mnt, "synced"), synced); err != nil {
		t.Fatal(err)
	}
	fd := openRW(t, filepath.Join(mnt, "synced"))
	m := mmapFile(t, fd, len(synced), rw, unix.MAP_SHARED)
	if !bytes.Equal(m.b, synced) {
		t.Fatalf("a shared mapping reads other bytes than were written (%s)", firstDiff(m.b, synced))
	}
	m.poke(synced, 100, "through the mapping")
	m.poke(synced, vfs.ChunkSize-3, "across a chunk boundary")
	m.poke(synced, len(synced)-4, "end!")
	if err := unix.Msync(m.b, unix.MS_SYNC); err != nil {
		t.Fatalf("msync: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "synced")); err != nil || !bytes.Equal(got, synced) {
		t.Errorf("read after msync: %d bytes %v, differs from the mapping", len(got), err)
	}
	// fsync after msync makes them durable in the vault, where other
	// processes read them.
	if err := fd.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	if got, _ := vaultFile(t, openVault(t, home), "/synced"); !bytes.Equal(got, synced) {
		t.Errorf("vault after msync and fsync differs from the mapping (%s)", firstDiff(got, synced))
	}
	m.unmap(t)
	fd.Close()
	want["/synced"] = synced

	// Not msync'd: written, the file closed, written again, unmapped.
	unsynced := randBytes(21, vfs.ChunkSize+1234)
	if err := writeSynced(filepath.Join(mnt, "unsynced"), unsynced); err != nil {
		t.Fatal(err)
	}
	fd = openRW(t, filepath.Join(mnt, "unsynced"))
	m = mmapFile(t, fd, len(unsynced), rw, unix.MAP_SHARED)
	m.poke(unsynced, 0, "before close")
	fd.Close()
	m.poke(unsynced, vfs.ChunkSize+7, "after close")
	m.unmap(t)
	want["/unsynced"] = unsynced

	// Grown with ftruncate, then filled through the mapping: every page
	// starts as a hole.
	grown := make([]byte, 3*vfs.ChunkSize+10)
	g, err := os.OpenFile(filepath.Join(mnt, "grown"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.Truncate(int64(len(grown))); err != nil {
		t.Fatal(err)
	}
	m = mmapFile(t, g, len(grown), rw, unix.MAP_SHARED)
	if !bytes.Equal(m.b, grown) {
		t.Errorf("a file grown with ftruncate maps other bytes than zeros (%s)", firstDiff(m.b, grown))
	}
	for off := 0; off < len(grown); off += 4096 {
		m.poke(grown, off, "page")
	}
	m.poke(grown, len(grown)-3, "end")
	m.unmap(t)
	g.Close()
	want["/grown"] = grown

	for p, w := range want {
		if got, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || !bytes.Equal(got, w) {
			t.Errorf("%s: read through the mount before unmount: %d bytes %v, want the %d mapped (%s)", p, len(got), err, len(w), firstDiff(got, w))
		}
	}

	// The vault after the unmount.
	cliUnmount(t, home, mnt)
	v := openVault(t, home)
	for p, w := range want {
		if got, ok := vaultFile(t, v, p); !ok || !bytes.Equal(got, w) {
			t.Errorf("%s: the vault after unmount holds %d bytes, want the %d written through the mapping (%s)",
				p, len(got), len(w), firstDiff(got, w))
		}
	}
	v.Close()

	// A new mount: private mappings read the vault's bytes; writes to a
	// private mapping stay in it.
	if code, doc := avfs(t, home, "mount", mnt); code != 0 {
		t.Fatalf("remount: %v", doc)
	}
	for p, w := range want {
		if got, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || !bytes.Equal(got, w) {
			t.Errorf("%s: read after remount: %d bytes %v, want the %d mapped (%s)", p, len(got), err, len(w), firstDiff(got, w))
		}
	}
	ro, err := os.Open(filepath.Join(mnt, "synced"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	m = mmapFile(t, ro, len(synced), unix.PROT_READ, unix.MAP_PRIVATE)
	if !bytes.Equal(m.b, synced) {
		t.Errorf("a private read-only mapping reads other bytes (%s)", firstDiff(m.b, synced))
	}
	m.unmap(t)
	ro.Close()

	fd = openRW(t, filepath.Join(mnt, "grown"))
	m = mmapFile(t, fd, len(grown), rw, unix.MAP_PRIVATE)
	copy(m.b[10:], "private")
	if err := unix.Msync(m.b, unix.MS_SYNC); err != nil {
		t.Fatalf("msync of a private mapping: %v", err)
	}
	m.unmap(t)
	fd.Close()
	if got, err := os.ReadFile(filepath.Join(mnt, "grown")); err != nil || !bytes.Equal(got, grown) {
		t.Errorf("a write to a private mapping shows in the file (%s)", firstDiff(got, grown))
	}
	cliUnmount(t, home, mnt)
	if got, _ := vaultFile(t, openVault(t, home), "/grown"); !bytes.Equal(got, grown) {
		t.Errorf("a write to a private mapping reached the vault (%s)", firstDiff(got, grown))
	}
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	fsck(t, h, "v")
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			end := min(i+16, len(got), len(want))
			return fmt.Sprintf("first difference at byte %d: %q instead of %q", i, got[i:end], want[i:end])
		}
	}
	if len(got) != len(want) {
		return "sizes differ"
	}
	return "same"
}
