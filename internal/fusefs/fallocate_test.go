package fusefs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestFallocate runs the same fallocate(2) calls on a file in the mount
// and on one on the native disk, and compares what each call returns and
// what the files then hold. The file is read before every call, so the
// kernel's cached pages of a zeroed range must go too.
func TestFallocate(t *testing.T) {
	const C = vfs.ChunkSize
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			if testing.Short() && engine != "sqlite" {
				t.Skip("-short: sqlite only")
			}
			f := mountVault(t, engine, false)
			base := make([]byte, 3*C+C/2)
			for i := range base {
				base[i] = byte(i%251 + 1)
			}
			size := int64(len(base))
			open := func(dir string) *os.File {
				p := filepath.Join(dir, "f")
				if err := os.WriteFile(p, base, 0o644); err != nil {
					t.Fatal(err)
				}
				fd, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { fd.Close() })
				return fd
			}
			native, mounted := open(t.TempDir()), open(f.Mnt)
			for _, c := range []struct {
				name     string
				mode     uint32
				off, len int64
			}{
				{"grow", 0, size - 10, 2 * C},
				{"reserve inside", unix.FALLOC_FL_KEEP_SIZE, 0, C},
				{"punch inside one chunk", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 100, 1000},
				{"punch across a boundary", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, C - 10, 20},
				{"punch a whole chunk", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, C, C},
				{"punch past the end", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 4*C + 7, 3 * C},
				{"punch without keep size", unix.FALLOC_FL_PUNCH_HOLE, 0, 10},
				{"zero a range", unix.FALLOC_FL_ZERO_RANGE, 2*C + 3, 100},
				{"zero past the end, growing", unix.FALLOC_FL_ZERO_RANGE, 5 * C, C + 1},
				{"zero past the end, keeping size", unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE, 7 * C, C},
				{"an empty range", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 0, 0},
			} {
				var errs [2]error
				for i, fd := range []*os.File{native, mounted} {
					if _, err := fd.ReadAt(make([]byte, 8*C), 0); err != nil && !errors.Is(err, io.EOF) {
						t.Fatal(err)
					}
					errs[i] = unix.Fallocate(int(fd.Fd()), c.mode, c.off, c.len)
				}
				if errs[0] != errs[1] {
					t.Errorf("%s: the mount returned %v, the native disk %v", c.name, errs[1], errs[0])
				}
				want, err := os.ReadFile(native.Name())
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(mounted.Name())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: the mount holds %d bytes, the native disk %d, first difference at %d",
						c.name, len(got), len(want), firstDifference(got, want))
				}
			}
		})
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSeekHoles checks SEEK_DATA and SEEK_HOLE through the mount on a
// file written sparsely and not yet persisted, so its buffered chunks
// must count: data in chunks 1 and 4, holes elsewhere, the last chunk
// partial.
func TestSeekHoles(t *testing.T) {
	const C = vfs.ChunkSize
	f := mountVault(t, "sqlite", false)
	fd, err := os.OpenFile(filepath.Join(f.Mnt, "sparse"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	size := int64(5*C + 100)
	for _, off := range []int64{C + 10, 4 * C} {
		if _, err := fd.WriteAt([]byte("data"), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := fd.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off    int64
		whence int
		want   int64 // -1: ENXIO
	}{
		{0, unix.SEEK_DATA, C},
		{0, unix.SEEK_HOLE, 0},
		{C + 3, unix.SEEK_DATA, C + 3},
		{C + 3, unix.SEEK_HOLE, 2 * C},
		{2 * C, unix.SEEK_DATA, 4 * C},
		{4*C + 50, unix.SEEK_HOLE, 5 * C},
		{5 * C, unix.SEEK_DATA, -1},
		{5*C + 1, unix.SEEK_HOLE, 5*C + 1},
		{size, unix.SEEK_HOLE, -1},
	} {
		got, err := unix.Seek(int(fd.Fd()), c.off, c.whence)
		if errors.Is(err, unix.ENXIO) {
			got = -1
		} else if err != nil {
			t.Fatalf("lseek(%d, %d): %v", c.off, c.whence, err)
		}
		if got != c.want {
			t.Errorf("lseek(%d, %d) = %d, want %d", c.off, c.whence, got, c.want)
		}
	}
}

// TestCopyFileRange runs the same copy_file_range(2) calls in the mount
// and on the native disk, written and unsynced files included, and
// compares the counts and the files; then cp, which copies with it.
func TestCopyFileRange(t *testing.T) {
	const C = vfs.ChunkSize
	f := mountVault(t, "sqlite", false)
	native := t.TempDir()
	src := make([]byte, 3*C+C/2)
	for i := range src {
		src[i] = byte(i%241 + 1)
	}
	dst := bytes.Repeat([]byte("dst."), C/2)
	for _, c := range []struct {
		name          string
		offIn, offOut int64
		n             int
	}{
		{"the whole file", 0, 0, 1 << 30},
		{"whole chunks", 0, C, 2 * C},
		{"unaligned", 10, 7, 100000},
		{"over the end of the source", 3 * C, 5 * C, 10 * C},
		{"from past the end", int64(len(src)) + 1, 0, 10},
	} {
		var counts [2]int
		var errs [2]error
		for i, dir := range []string{native, f.Mnt} {
			for _, file := range []struct {
				name string
				data []byte
			}{{"src", src}, {"dst", dst}} {
				if err := os.WriteFile(filepath.Join(dir, file.name), file.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			in, err := os.Open(filepath.Join(dir, "src"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(filepath.Join(dir, "dst"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			offIn, offOut := c.offIn, c.offOut
			counts[i], errs[i] = unix.CopyFileRange(int(in.Fd()), &offIn, int(out.Fd()), &offOut, c.n, 0)
			in.Close()
			out.Close()
		}
		if counts[0] != counts[1] || errs[0] != errs[1] {
			t.Errorf("%s: the mount copied %d (%v), the native disk %d (%v)", c.name, counts[1], errs[1], counts[0], errs[0])
		}
		want, err := os.ReadFile(filepath.Join(native, "dst"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(f.Mnt, "dst"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the mount's dst holds %d bytes, the native disk's %d, first difference at %d",
				c.name, len(got), len(want), firstDifference(got, want))
		}
	}
	if out, err := exec.Command("cp", filepath.Join(f.Mnt, "src"), filepath.Join(f.Mnt, "copy")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(f.Mnt, "copy")); err != nil || !bytes.Equal(got, src) {
		t.Errorf("cp's copy holds %d bytes (%v), want the %d of src", len(got), err, len(src))
	}
}
