package vfs_test

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Extended attributes count against max_size_mb, names and values: the
// issue's 200 values of 64 KiB (12.5 MiB) in a 4 MiB vault are refused
// once the vault is full, and every refused set changes nothing.
func TestXattrsCountAgainstMaxSize(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/f", "x")
		f.update(func(tx *vfs.Tx) error { return tx.SetQuota(vfs.Quota{MaxSizeMB: 4}) })
		value := bytes.Repeat([]byte{'v'}, vfs.XattrValueMax)
		var ino vfs.Ino
		f.update(func(tx *vfs.Tx) error {
			a, err := tx.Resolve("/f", true)
			ino = a.Ino
			return err
		})
		accepted := 0
		var refused error
		for i := 0; i < 200 && refused == nil; i++ {
			name := "user.k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			refused = f.v.Update(func(tx *vfs.Tx) error { return tx.SetXattr(ino, name, value, 0) })
			if refused == nil {
				accepted++
			}
		}
		if !errs.Is(refused, errs.QuotaExceeded) || !errors.Is(refused, syscall.ENOSPC) {
			t.Fatalf("after %d attributes: %v, want QuotaExceeded (ENOSPC)", accepted, refused)
		}
		if max := (4 << 20) / vfs.XattrValueMax; accepted >= max {
			t.Fatalf("%d attributes of 64 KiB accepted in a 4 MiB vault", accepted)
		}
		var u vfs.Usage
		var names []string
		f.update(func(tx *vfs.Tx) (err error) {
			if u, err = tx.Usage(); err != nil {
				return err
			}
			names, err = tx.ListXattr(ino)
			return err
		})
		if len(names) != accepted {
			t.Fatalf("%d attributes listed, %d accepted: the refused one changed something", len(names), accepted)
		}
		want := int64(1) + int64(accepted)*int64(len("user.kaa")+vfs.XattrValueMax)
		if u.Bytes != want {
			t.Fatalf("usage %d bytes, want %d", u.Bytes, want)
		}
		// Replacing a value by a shorter one, removing one and removing the
		// file give the bytes back.
		f.update(func(tx *vfs.Tx) error { return tx.SetXattr(ino, "user.kaa", []byte("s"), 0) })
		f.update(func(tx *vfs.Tx) error { return tx.RemoveXattr(ino, "user.kba") })
		f.update(func(tx *vfs.Tx) (err error) { u, err = tx.Usage(); return err })
		want -= vfs.XattrValueMax - 1 + int64(len("user.kba")+vfs.XattrValueMax)
		if u.Bytes != want {
			t.Fatalf("after shrinking and removing: usage %d bytes, want %d", u.Bytes, want)
		}
		f.update(func(tx *vfs.Tx) error { return tx.Unlink(vfs.RootIno, "f") })
		f.update(func(tx *vfs.Tx) (err error) { u, err = tx.Usage(); return err })
		if u.Bytes != 0 {
			t.Fatalf("after removing the file: usage %d bytes, want 0", u.Bytes)
		}
	})
}
