package vfs_test

import (
	"bytes"
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// flipChunkBytes flips one byte inside every stored chunk of the vault
// file at path, through its engine, as damage of the disk would.
func flipChunkBytes(t *testing.T, path string) {
	t.Helper()
	eng, err := engines.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := 0
	err = eng.Update(func(tx kv.Tx) error {
		var keys, vals [][]byte
		err := tx.Scan([]byte{'C'}, []byte{'D'}, func(k, v []byte) (bool, error) {
			keys, vals = append(keys, slices.Clone(k)), append(vals, slices.Clone(v))
			return true, nil
		})
		for i := range keys {
			vals[i][len(vals[i])/2] ^= 0x40
			if err == nil {
				err = tx.Put(keys[i], vals[i])
			}
			n++
		}
		return err
	})
	if err != nil || n == 0 {
		t.Fatalf("flipping chunk bytes: %d chunks, %v", n, err)
	}
}

// A byte flipped inside a stored chunk is CorruptVault (EIO) on read, at
// every read, in every verify mode but off, and never wrong bytes.
func TestReadsAreVerified(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			home, err := registry.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			v, err := home.Create("test", registry.CreateOptions{Engine: engine})
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("avfs"), vfs.ChunkSize/2) // two chunks
			err = v.Update(func(tx *vfs.Tx) error {
				_, err := tx.WriteFile("/f", data, 0o644)
				return err
			})
			v.Close()
			if err != nil {
				t.Fatal(err)
			}
			flipChunkBytes(t, home.Path("test"))
			if v, err = home.Open("test"); err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if r, err := v.Fsck(); err != nil || r.OK() {
				t.Errorf("fsck of the damaged vault: %+v, %v", r, err)
			}
			read := func() ([]byte, error) {
				var got []byte
				err := v.View(func(tx *vfs.Tx) (err error) {
					got, err = tx.ReadFile("/f")
					return err
				})
				return got, err
			}
			for _, mode := range []vfs.VerifyMode{vfs.VerifyOnce, vfs.VerifyAlways} {
				v.SetVerifyReads(mode)
				for range 2 {
					got, err := read()
					if !errs.Is(err, errs.CorruptVault) || !errors.Is(err, syscall.EIO) {
						t.Fatalf("mode %d: read of a damaged chunk: %d bytes, %v; want CorruptVault (EIO)", mode, len(got), err)
					}
				}
			}
			v.SetVerifyReads(vfs.VerifyOff)
			if got, err := read(); err != nil || bytes.Equal(got, data) {
				t.Fatalf("unverified read: %v (the damage must show when nothing checks)", err)
			}
		})
	}
}
