package vfs_test

import (
	"bytes"
	"encoding/json"
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

// A vault made before attributes counted (its header lacks xattr-usage)
// keeps its counters as they were, and so do its forks, so fsck agrees
// with them; a new vault has the feature.
func TestXattrUsageNeedsTheFeature(t *testing.T) {
	home, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := home.Create("old", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(v.Header().Features, "xattr-usage") {
		t.Fatalf("a new vault's features: %v", v.Header().Features)
	}
	_, err = writeFile(v, "/f", "x")
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engines.Open(home.Path("old"))
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Update(func(tx kv.Tx) error {
		b, err := tx.Get([]byte("\x00avfs"))
		if err != nil {
			return err
		}
		var h map[string]any
		if err := json.Unmarshal(b, &h); err != nil {
			return err
		}
		h["features"] = []string{"layers", "chunks-sha256-64k"}
		b, _ = json.Marshal(h)
		return tx.Put([]byte("\x00avfs"), b)
	})
	eng.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"old", "fork"} {
		if name == "fork" {
			fv, err := home.Fork("old", "fork")
			if err != nil {
				t.Fatal(err)
			}
			fv.Close()
		}
		v, err := home.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		err = v.Update(func(tx *vfs.Tx) error {
			a, err := tx.Resolve("/f", true)
			if err == nil {
				err = tx.SetXattr(a.Ino, "user."+name, []byte("value"), 0)
			}
			return err
		})
		var u vfs.Usage
		if err == nil {
			err = v.View(func(tx *vfs.Tx) (err error) { u, err = tx.Usage(); return err })
		}
		if err != nil || u.Bytes != 1 {
			t.Errorf("%s: usage %+v, %v; want the 1 byte of /f alone", name, u, err)
		}
		checkFsck(t, v)
		v.Close()
	}
}

func writeFile(v *vfs.Vault, p, content string) (vfs.Attr, error) {
	var a vfs.Attr
	err := v.Update(func(tx *vfs.Tx) (err error) {
		a, err = tx.WriteFile(p, []byte(content), 0o644)
		return err
	})
	return a, err
}
