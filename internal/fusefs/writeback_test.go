package fusefs_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestWriteBack checks that buffered writes are seen by reads and stat
// before they are persisted, that partial-chunk edits, holes and
// truncation keep the file exact, and that fsync commits it.
func TestWriteBack(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	p := filepath.Join(f.Mnt, "big")
	want := randBytes(1, 3*vfs.ChunkSize+1000)
	if err := writeSynced(p, want); err != nil {
		t.Fatal(err)
	}
	if got, _ := vaultFile(t, f.S.Vault(), "/big"); !bytes.Equal(got, want) {
		t.Fatalf("vault after fsync holds %d bytes, want %d", len(got), len(want))
	}
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	edit := func(off int64, b []byte) {
		t.Helper()
		if _, err := fd.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		if end := off + int64(len(b)); end > int64(len(want)) {
			want = append(want, make([]byte, end-int64(len(want)))...)
		}
		copy(want[off:], b)
	}
	edit(100, []byte("middle of chunk 0"))
	edit(vfs.ChunkSize-5, []byte("across a chunk boundary"))
	edit(6*vfs.ChunkSize+7, []byte("past a hole")) // grows the file
	check := func(what string) {
		t.Helper()
		st, err := fd.Stat()
		if err != nil || st.Size() != int64(len(want)) {
			t.Fatalf("%s: stat size %v %v, want %d", what, st.Size(), err, len(want))
		}
		got := make([]byte, len(want)+10)
		n, err := fd.ReadAt(got, 0)
		if n != len(want) || !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: read %d bytes %v, differs from what was written", what, n, err)
		}
	}
	check("buffered")
	if err := fd.Truncate(2 * vfs.ChunkSize); err != nil { // persists first
		t.Fatal(err)
	}
	want = want[:2*vfs.ChunkSize]
	check("truncated")
	edit(10, []byte("after truncate"))
	if err := fd.Sync(); err != nil {
		t.Fatal(err)
	}
	check("synced")
	if got, _ := vaultFile(t, f.S.Vault(), "/big"); !bytes.Equal(got, want) {
		t.Fatal("vault after fsync differs from what was written")
	}

	// Unlink of a buffered file drops its data; a rename keeps it.
	if err := os.WriteFile(filepath.Join(f.Mnt, "gone"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.Mnt, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Mnt, "a"), []byte("renamed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(f.Mnt, "a"), filepath.Join(f.Mnt, "b")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.Mnt, "b")); err != nil || string(b) != "renamed" {
		t.Fatalf("renamed buffered file reads %q %v", b, err)
	}
	// The background persister commits idle files without an fsync.
	waitFor(t, "background persist", func() bool {
		b, _ := vaultFile(t, f.S.Vault(), "/b")
		return string(b) == "renamed"
	})
}

// TestWriteBackBudget writes more than the budget to one file and checks
// that it all arrives.
func TestWriteBackBudget(t *testing.T) {
	canMount(t)
	h, name := newVault(t, "sqlite")
	s := mountd.New(mountd.Options{Home: h, Vault: name, Mountpoint: t.TempDir(), WriteBudget: 1 << 20, Log: logWriter{T: t}})
	if err := s.Mount(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountEventually(t, s); fsck(t, h, name) })
	want := randBytes(2, 5<<20+123)
	p := filepath.Join(s.Mountpoint(), "f")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes %v", len(got), err)
	}
	if err := s.Unmount(false); err != nil {
		t.Fatal(err)
	}
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got, _ := vaultFile(t, v, "/f"); !bytes.Equal(got, want) {
		t.Fatalf("vault after unmount holds %d bytes, want %d", len(got), len(want))
	}
}

func setQuota(t *testing.T, h *registry.Home, name string, q vfs.Quota) {
	t.Helper()
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Update(func(tx *vfs.Tx) error { return tx.SetQuota(q) }); err != nil {
		t.Fatal(err)
	}
}

// writeUntil writes data to path in 64 KiB writes until one fails, and
// returns how many bytes were written and the error.
func writeUntil(path string, data []byte) (int, error) {
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer fd.Close()
	n := 0
	for n < len(data) {
		w, err := fd.Write(data[n:min(n+vfs.ChunkSize, len(data))])
		n += w
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestQuotaThroughMount checks that writes past a quota fail when they
// are made, with the quota's errno, and that the vault then holds exactly
// the writes that succeeded.
func TestQuotaThroughMount(t *testing.T) {
	canMount(t)
	h, name := newVault(t, "sqlite")
	setQuota(t, h, name, vfs.Quota{MaxSizeMB: 3, MaxFileSizeMB: 2, MaxFiles: 4})
	f := mountOn(t, h, name, t.TempDir(), false)

	a := randBytes(3, 3<<20)
	n, err := writeUntil(filepath.Join(f.Mnt, "a"), a)
	if !errors.Is(err, syscall.EFBIG) || n != 2<<20 {
		t.Errorf("file past max_file_size_mb: wrote %d, %v; want %d, EFBIG", n, err, 2<<20)
	}
	b := randBytes(4, 2<<20)
	m, err := writeUntil(filepath.Join(f.Mnt, "b"), b)
	if !errors.Is(err, syscall.ENOSPC) || m != 1<<20 {
		t.Errorf("vault past max_size_mb: wrote %d, %v; want %d, ENOSPC", m, err, 1<<20)
	}
	for i, p := range []string{"c", "d", "e"} {
		err := os.WriteFile(filepath.Join(f.Mnt, p), nil, 0o644)
		if i < 2 && err != nil {
			t.Errorf("file %d: %v", i+3, err)
		}
		if i == 2 && !errors.Is(err, syscall.EDQUOT) {
			t.Errorf("file past max_files: %v, want EDQUOT", err)
		}
	}
	if err := os.Truncate(filepath.Join(f.Mnt, "c"), 100); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("truncate up past max_size_mb: %v, want ENOSPC", err)
	}
	if err := f.S.Unmount(false); err != nil {
		t.Fatal(err)
	}
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got, _ := vaultFile(t, v, "/a"); !bytes.Equal(got, a[:n]) {
		t.Errorf("vault holds %d bytes of a, want the %d written", len(got), n)
	}
	if got, _ := vaultFile(t, v, "/b"); !bytes.Equal(got, b[:m]) {
		t.Errorf("vault holds %d bytes of b, want the %d written", len(got), m)
	}
	if _, ok := vaultFile(t, v, "/e"); ok {
		t.Error("the file refused by max_files exists")
	}
}

// TestCrash kills the serving process with SIGKILL while a writer is
// busy, then checks that the vault passes fsck and holds every byte that
// was fsync'd.
func TestCrash(t *testing.T) {
	home, mnt, doc := cliMount(t)
	pid := int(doc["pid"].(float64))

	synced := map[string][]byte{}
	for i := range 20 {
		name := filepath.Join("d", string(rune('a'+i)))
		if i == 0 {
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		data := randBytes(uint64(10+i), 1000+i*30000)
		if err := writeSynced(filepath.Join(mnt, name), data); err != nil {
			t.Fatal(err)
		}
		synced["/"+name] = data
	}
	// Unsynced writes in flight when the server dies.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := randBytes(99, 256<<10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.WriteFile(filepath.Join(mnt, "busy"), buf[:(i%4+1)*(64<<10)], 0o644)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed server to go", func() bool { return !alive(pid) })
	close(stop)
	_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	<-done

	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	fsck(t, h, "v")
	v, err := h.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for p, want := range synced {
		if got, _ := vaultFile(t, v, p); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes after the crash, want the %d fsync'd", p, len(got), len(want))
		}
	}
}
