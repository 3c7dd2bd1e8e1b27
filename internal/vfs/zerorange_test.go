package vfs_test

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestZeroRange checks fallocate's hole punching and zeroing against a
// byte slice doing the same: content, size, and (punching a whole file)
// chunks that become holes and so garbage.
func TestZeroRange(t *testing.T) {
	const C = vfs.ChunkSize
	base := make([]byte, 3*C+C/2)
	for i := range base {
		base[i] = byte(i%251 + 1) // no zero bytes, no repeated chunk
	}
	size := uint64(len(base))
	cases := []struct {
		name      string
		off, n    uint64
		keep      bool
		wantFreed int // chunks GC frees afterwards; -1: don't check
	}{
		{"inside one chunk", 100, 1000, true, 1},
		{"across a chunk boundary", C - 10, 20, true, 2},
		{"one whole chunk", C, C, true, 1},
		{"to past the end, keeping the size", 2*C + 5, 10 * C, true, 2},
		{"past the end, keeping the size", size + 10, 100, true, 0},
		{"the whole file", 0, size, true, 4},
		{"over the end, growing", size - 10, 100, false, 1},
		{"past the end, growing", size + C, 10, false, 0},
	}
	for _, engine := range []string{"mem", "sqlite"} {
		for _, c := range cases {
			t.Run(engine+"/"+c.name, func(t *testing.T) {
				f := newVault(t, engine)
				f.write("/f", string(base))
				f.update(func(tx *vfs.Tx) error {
					a, err := tx.Resolve("/f", false)
					if err != nil {
						return err
					}
					return tx.ZeroRange(a.Ino, c.off, c.n, c.keep)
				})
				want := bytes.Clone(base)
				if end := c.off + c.n; !c.keep && end > size {
					want = append(want, make([]byte, end-size)...)
				}
				clear(want[min(c.off, uint64(len(want))):min(c.off+c.n, uint64(len(want)))])
				if got := f.read("/f"); got != string(want) {
					t.Errorf("content differs from a slice zeroed alike (%d bytes, want %d)", len(got), len(want))
				}
				if c.wantFreed >= 0 && engine == "sqlite" {
					st, err := f.v.GC()
					if err != nil {
						t.Fatal(err)
					}
					if st.ChunksFreed != c.wantFreed {
						t.Errorf("GC freed %d chunks, want %d", st.ChunksFreed, c.wantFreed)
					}
				}
			})
		}
	}
}

func TestZeroRangeRefusals(t *testing.T) {
	f := newVault(t, "sqlite")
	f.write("/d/f", "data")
	f.update(func(tx *vfs.Tx) error { return tx.SetQuota(vfs.Quota{MaxFileSizeMB: 1}) })
	try := func(p string, off, n uint64, keep bool) error {
		return f.v.Update(func(tx *vfs.Tx) error {
			a, err := tx.Resolve(p, false)
			if err != nil {
				return err
			}
			return tx.ZeroRange(a.Ino, off, n, keep)
		})
	}
	for _, c := range []struct {
		name      string
		p         string
		off, n    uint64
		keep      bool
		wantErrno syscall.Errno
	}{
		{"an empty range", "/d/f", 0, 0, true, syscall.EINVAL},
		{"a directory", "/d", 0, 1, true, syscall.EISDIR},
		{"growth past max_file_size_mb", "/d/f", 0, 2 << 20, false, syscall.EFBIG},
	} {
		if err := try(c.p, c.off, c.n, c.keep); !errors.Is(err, c.wantErrno) {
			t.Errorf("%s: %v, want %v", c.name, err, c.wantErrno)
		}
	}
	if got := f.read("/d/f"); got != "data" {
		t.Errorf("after refusals /d/f = %q", got)
	}
}

// TestSeek checks SEEK_DATA and SEEK_HOLE against the chunks a file holds,
// with holes punched over data a checkpoint keeps in a lower layer.
func TestSeek(t *testing.T) {
	const C = vfs.ChunkSize
	size := uint64(6*C + C/2)
	data := []bool{false, true, true, false, false, true, false} // chunk by chunk
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/f", string(bytes.Repeat([]byte("d"), int(size))))
		if _, err := f.v.SaveCheckpoint("full", ""); err != nil {
			t.Fatal(err)
		}
		var ino vfs.Ino
		f.update(func(tx *vfs.Tx) error {
			a, err := tx.Resolve("/f", false)
			if err != nil {
				return err
			}
			ino = a.Ino
			for _, r := range [][2]uint64{{0, C}, {3 * C, 2 * C}, {6 * C, C / 2}} {
				if err := tx.ZeroRange(ino, r[0], r[1], true); err != nil {
					return err
				}
			}
			return nil
		})
		// want is what lseek should answer, or -1 for ENXIO.
		want := func(off uint64, hole bool) int64 {
			if off >= size {
				return -1
			}
			for i := off / C; i < uint64(len(data)); i++ {
				if data[i] != hole {
					return int64(max(off, i*C))
				}
			}
			if hole {
				return int64(size)
			}
			return -1
		}
		for _, off := range []uint64{0, 10, C, C + 5, 3*C - 1, 3 * C, 4*C + 7, 5 * C, 5*C + 9, 6*C + 1, size - 1, size, size + 10} {
			for _, hole := range []bool{false, true} {
				var got int64
				err := f.v.View(func(tx *vfs.Tx) error {
					pos, err := tx.Seek(ino, off, hole)
					got = int64(pos)
					return err
				})
				if errors.Is(err, syscall.ENXIO) {
					got = -1
				} else if err != nil {
					t.Fatal(err)
				}
				if w := want(off, hole); got != w {
					t.Errorf("seek from %d (hole %v) = %d, want %d", off, hole, got, w)
				}
			}
		}
	})
}
