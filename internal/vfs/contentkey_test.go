package vfs_test

import (
	"bytes"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestContentKey: files that read the same bytes through the same chunks
// share a key, whatever layer or name holds them; a changed byte, a
// different size or a hole where data was gives another.
func TestContentKey(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		big := bytes.Repeat([]byte("0123456789abcdef"), 3*vfs.ChunkSize/16+5)
		key := func(p string) [32]byte {
			t.Helper()
			var k [32]byte
			if err := f.v.View(func(tx *vfs.Tx) error {
				at, err := tx.Resolve(p, false)
				if err == nil {
					k, err = tx.ContentKey(at.Ino)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return k
		}
		f.update(func(tx *vfs.Tx) error {
			for _, p := range []string{"/a", "/b"} {
				if _, err := tx.WriteFile(p, big, 0o644); err != nil {
					return err
				}
			}
			if _, err := tx.WriteFile("/empty", nil, 0o644); err != nil {
				return err
			}
			_, err := tx.MkdirAll("/d", 0o755)
			return err
		})
		if err := f.v.Seal(); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error { // /c: the same bytes, written in a later layer
			_, err := tx.WriteFile("/c", big, 0o600)
			return err
		})
		a := key("/a")
		if key("/b") != a || key("/c") != a {
			t.Fatal("equal files written alike have different keys")
		}
		f.update(func(tx *vfs.Tx) error {
			at, err := tx.Resolve("/b", false)
			if err == nil {
				_, err = tx.Write(at.Ino, int64(len(big)-1), []byte("!"))
			}
			if err == nil {
				at, err = tx.Resolve("/c", false)
			}
			if err == nil {
				err = tx.ZeroRange(at.Ino, 0, vfs.ChunkSize, true)
			}
			return err
		})
		if key("/b") == a || key("/c") == a || key("/b") == key("/c") {
			t.Fatal("changed files kept the key")
		}
		if key("/empty") == a {
			t.Fatal("an empty file has a full one's key")
		}
		err := f.v.View(func(tx *vfs.Tx) error {
			at, err := tx.Resolve("/d", false)
			if err == nil {
				_, err = tx.ContentKey(at.Ino)
			}
			return err
		})
		if !errs.Is(err, errs.NotAFile) {
			t.Fatalf("content key of a directory: %v, want NotAFile", err)
		}
	})
}
