package vfs_test

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// stageWrite writes data to stage in steps of one transaction each.
func stageWrite(f *fixture, stage vfs.Ino, data []byte, step int) error {
	for off := 0; off < len(data); off += step {
		err := f.v.Update(func(tx *vfs.Tx) error {
			a, err := tx.GetAttr(stage)
			if err == nil {
				_, err = tx.Write(stage, int64(a.Size), data[off:min(off+step, len(data))])
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *fixture) ino(p string) vfs.Ino {
	f.t.Helper()
	var ino vfs.Ino
	f.update(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, true)
		ino = a.Ino
		return err
	})
	return ino
}

func (f *fixture) usage() vfs.Usage {
	f.t.Helper()
	var u vfs.Usage
	f.update(func(tx *vfs.Tx) (err error) { u, err = tx.Usage(); return err })
	return u
}

// A staged write is invisible until it is put in place, keeps the
// target's inode when committed, and changes nothing when dropped.
func TestStagedWrites(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/f", "old")
		f.update(func(tx *vfs.Tx) error {
			if _, err := tx.Link(f.inoIn(tx, "/f"), vfs.RootIno, "hard"); err != nil {
				return err
			}
			return tx.SetXattr(f.inoIn(tx, "/f"), "user.k", []byte("v"), 0)
		})
		before := f.usage()
		target := f.ino("/f")
		data := bytes.Repeat([]byte("0123456789abcdef"), 3*vfs.ChunkSize/16+5)

		// Dropped: nothing changed.
		var stage vfs.Ino
		f.update(func(tx *vfs.Tx) (err error) { stage, err = tx.Stage(target, false); return err })
		if err := stageWrite(f, stage, data, vfs.ChunkSize); err != nil {
			t.Fatal(err)
		}
		if got := f.read("/f"); got != "old" {
			t.Fatalf("while staged /f = %q", got)
		}
		f.update(func(tx *vfs.Tx) error { return tx.AbortStage(stage) })
		if got, u := f.read("/f"), f.usage(); got != "old" || u != before {
			t.Fatalf("after abort: /f = %q, usage %+v, want %+v", got, u, before)
		}

		// Appended and committed: the same inode, its other name and xattr.
		f.update(func(tx *vfs.Tx) (err error) { stage, err = tx.Stage(target, true); return err })
		if err := stageWrite(f, stage, data, vfs.ChunkSize); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error { _, err := tx.CommitStage(stage, target); return err })
		want := "old" + string(data)
		if f.read("/hard") != want || f.ino("/f") != target {
			t.Fatal("the committed content is not in the target's inode")
		}
		f.update(func(tx *vfs.Tx) error {
			v, err := tx.GetXattr(target, "user.k")
			if err == nil && string(v) != "v" {
				err = errors.New("xattr changed")
			}
			return err
		})
		if u := f.usage(); u.Files != before.Files || u.Bytes != before.Bytes+int64(len(data)) {
			t.Fatalf("after commit: usage %+v", u)
		}

		// A new file, named in O(1); a committed stage is no stage any more.
		f.update(func(tx *vfs.Tx) (err error) { stage, err = tx.Stage(0, false); return err })
		if err := stageWrite(f, stage, data, vfs.ChunkSize); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error { _, err := tx.PlaceStage(stage, vfs.RootIno, "new", 0o640); return err })
		if f.read("/new") != string(data) {
			t.Fatal("placed stage reads differently")
		}
		err := f.v.Update(func(tx *vfs.Tx) error { _, err := tx.CommitStage(stage, target); return err })
		if !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("commit of a placed stage: %v, want EINVAL", err)
		}
	})
}

// A stage replacing a file is not refused for the bytes that file will
// give back, and over a limit it is refused and dropped without a trace.
func TestStagedWriteQuota(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		three := bytes.Repeat([]byte{7}, 3<<20)
		f.update(func(tx *vfs.Tx) error {
			_, err := tx.WriteFile("/f", three, 0o644)
			return err
		})
		f.update(func(tx *vfs.Tx) error { return tx.SetQuota(vfs.Quota{MaxSizeMB: 4, MaxFiles: 1}) })
		target := f.ino("/f")
		var stage vfs.Ino
		f.update(func(tx *vfs.Tx) (err error) { stage, err = tx.Stage(target, false); return err })
		if err := stageWrite(f, stage, bytes.Repeat([]byte{8}, 3<<20), 1<<20); err != nil {
			t.Fatalf("replacing 3 MiB by 3 MiB in a 4 MiB vault: %v", err)
		}
		f.update(func(tx *vfs.Tx) error { _, err := tx.CommitStage(stage, target); return err })
		if u := f.usage(); u.Bytes != 3<<20 || u.Files != 1 {
			t.Fatalf("usage %+v", u)
		}

		f.update(func(tx *vfs.Tx) (err error) { stage, err = tx.Stage(target, true); return err })
		err := stageWrite(f, stage, bytes.Repeat([]byte{9}, 2<<20), 1<<20)
		if !errs.Is(err, errs.QuotaExceeded) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("appending 2 MiB to 3 MiB in a 4 MiB vault: %v", err)
		}
		f.update(func(tx *vfs.Tx) error { return tx.AbortStage(stage) })
		if u := f.usage(); u.Bytes != 3<<20 || u.Files != 1 || f.read("/f")[0] != 8 {
			t.Fatalf("after the refused append: usage %+v", u)
		}
		err = f.v.Update(func(tx *vfs.Tx) (err error) { _, err = tx.Stage(0, false); return err })
		if !errs.Is(err, errs.QuotaExceeded) {
			t.Fatalf("a new file's stage past max_files: %v", err)
		}
	})
}

func (f *fixture) inoIn(tx *vfs.Tx, p string) vfs.Ino {
	a, err := tx.Resolve(p, true)
	if err != nil {
		f.t.Fatal(err)
	}
	return a.Ino
}
