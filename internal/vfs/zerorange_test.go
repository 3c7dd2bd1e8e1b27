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

// TestCopyRange checks copy_file_range's model against byte slices, in
// the aligned ranges that share whole chunks and the others: content, a
// hole copied as a hole, and the count of bytes copied. (Equal chunks are
// stored once either way, so sharing shows only in the time it saves.)
func TestCopyRange(t *testing.T) {
	const C = vfs.ChunkSize
	pattern := func(n int, salt byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i%241) + salt
		}
		return b
	}
	srcData := pattern(3*C+C/2, 1)
	clear(srcData[C : 2*C]) // a hole in chunk 1
	dstData := pattern(2*C+100, 7)
	cases := []struct {
		name             string
		offIn, offOut, n uint64
		same             bool // copy within src
		want             uint64
	}{
		{"the whole file, aligned", 0, 0, 1 << 40, false, uint64(len(srcData))},
		{"whole chunks, aligned", 0, C, 2 * C, false, 2 * C},
		{"a hole over data", C, 0, C, false, C},
		{"unaligned", 10, 7, 100000, false, 100000},
		{"from past the end", uint64(len(srcData)), 0, 10, false, 0},
		{"over the end of src", 3 * C, 5 * C, 10 * C, false, C / 2},
		{"within one file, apart", 0, 4 * C, C, true, C},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newVault(t, "sqlite")
			f.write("/src", string(srcData))
			f.write("/dst", string(dstData))
			f.update(func(tx *vfs.Tx) error {
				a, err := tx.Resolve("/src", false)
				if err != nil {
					return err
				}
				return tx.ZeroRange(a.Ino, C, C, true) // store chunk 1 as a hole
			})
			if _, err := f.v.GC(); err != nil {
				t.Fatal(err)
			}
			dst := "/dst"
			want := bytes.Clone(dstData)
			source := srcData
			if c.same {
				dst, want = "/src", bytes.Clone(srcData)
			}
			var got uint64
			f.update(func(tx *vfs.Tx) error {
				s, err := tx.Resolve("/src", false)
				if err != nil {
					return err
				}
				d, err := tx.Resolve(dst, false)
				if err != nil {
					return err
				}
				got, err = tx.CopyRange(s.Ino, c.offIn, d.Ino, c.offOut, c.n)
				return err
			})
			if got != c.want {
				t.Errorf("copied %d bytes, want %d", got, c.want)
			}
			if end := c.offOut + got; end > uint64(len(want)) {
				want = append(want, make([]byte, end-uint64(len(want)))...)
			}
			if got > 0 {
				copy(want[c.offOut:], source[c.offIn:c.offIn+got])
			}
			if content := f.read(dst); content != string(want) {
				t.Errorf("%s differs from a slice copied alike (%d bytes, want %d)", dst, len(content), len(want))
			}
		})
	}

	f := newVault(t, "sqlite")
	f.write("/src", string(srcData))
	err := f.v.Update(func(tx *vfs.Tx) error {
		s, err := tx.Resolve("/src", false)
		if err != nil {
			return err
		}
		_, err = tx.CopyRange(s.Ino, 0, s.Ino, C/2, C)
		return err
	})
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("overlapping ranges of one file: %v, want EINVAL", err)
	}
}
