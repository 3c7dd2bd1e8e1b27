package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// updateCounter counts the write transactions of the engine it wraps.
type updateCounter struct {
	kv.Engine
	updates atomic.Int64
}

func (e *updateCounter) Update(fn func(kv.Tx) error) error {
	e.updates.Add(1)
	return e.Engine.Update(fn)
}

func countingVault(t *testing.T, q vfs.Quota) (*fixture, *updateCounter) {
	t.Helper()
	eng := &updateCounter{Engine: engines.NewMemory()}
	v, err := vfs.Create(eng, "test", q)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, v: v}
	t.Cleanup(func() {
		checkFsck(t, v)
		v.Close()
	})
	return f, eng
}

func (f *fixture) tryRead(p string) (string, error) {
	var b []byte
	err := f.v.View(func(tx *vfs.Tx) (err error) { b, err = tx.ReadFile(p); return err })
	return string(b), err
}

// TestWriteFromSteps: content over one WriteStep is written in one
// transaction per step (memory and transactions stay bounded), content
// within one step in one transaction.
func TestWriteFromSteps(t *testing.T) {
	t.Parallel()
	f, eng := countingVault(t, vfs.Quota{})
	big := bytes.Repeat([]byte("0123456789abcdef"), (5*vfs.WriteStep/2)/16) // 2.5 steps
	before := eng.updates.Load()
	w, err := f.v.WriteFrom(context.Background(), "/d/big", bytes.NewReader(big), vfs.WriteOptions{Mode: 0o644, MakeParents: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := eng.updates.Load() - before; n != 4 { // the stage, then three steps
		t.Errorf("a write of 2.5 steps took %d transactions, want 4", n)
	}
	if w != (vfs.Written{Size: int64(len(big)), Written: int64(len(big)), Created: true}) {
		t.Errorf("written = %+v", w)
	}
	if got, err := f.tryRead("/d/big"); err != nil || got != string(big) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	before = eng.updates.Load()
	w, err = f.v.WriteFrom(context.Background(), "/d/big", strings.NewReader("small"), vfs.WriteOptions{Append: true, Mode: 0o644})
	if err != nil || w.Size != int64(len(big))+5 || w.Created {
		t.Fatalf("append: %+v, %v", w, err)
	}
	if n := eng.updates.Load() - before; n != 1 {
		t.Errorf("a small append took %d transactions, want 1", n)
	}
}

// failingReader gives n bytes, then fails.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("disk gone")
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

// cancelAfter cancels its context once n bytes were read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	if c.n -= k; c.n <= 0 {
		c.cancel()
	}
	return k, err
}

// TestWriteFromRefusedChangesNothing: a staged write refused half-way —
// by a quota, a failing source or a cancelled context — leaves the file,
// the usage and the tree (no parent made by MakeParents) as they were.
func TestWriteFromRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	f, _ := countingVault(t, vfs.Quota{MaxFileSizeMB: 2})
	f.write("/keep", "kept")
	before := f.usage()
	three := bytes.Repeat([]byte("x"), 3*vfs.WriteStep)
	for _, c := range []struct {
		name string
		src  func(cancel context.CancelFunc) io.Reader
		want func(error) bool
	}{
		{"quota", func(context.CancelFunc) io.Reader { return bytes.NewReader(three) },
			func(err error) bool { return errs.Is(err, errs.QuotaExceeded) }},
		{"source", func(context.CancelFunc) io.Reader { return &failingReader{n: vfs.WriteStep + 100} },
			func(err error) bool { return errs.Is(err, errs.IoError) }},
		{"cancel", func(cancel context.CancelFunc) io.Reader {
			return &cancelAfter{r: bytes.NewReader(three[:2*vfs.WriteStep]), n: vfs.WriteStep, cancel: cancel}
		}, func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		for _, p := range []string{"/keep", "/new/dir/file"} {
			ctx, cancel := context.WithCancel(context.Background())
			_, err := f.v.WriteFrom(ctx, p, c.src(cancel), vfs.WriteOptions{Mode: 0o644, MakeParents: true})
			cancel()
			if !c.want(err) {
				t.Errorf("%s, %s: %v", c.name, p, err)
			}
		}
	}
	if got, err := f.tryRead("/keep"); err != nil || got != "kept" {
		t.Errorf("/keep = %q, %v", got, err)
	}
	if _, err := f.tryRead("/new"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a refused write left /new: %v", err)
	}
	if u := f.usage(); u != before {
		t.Errorf("usage %+v, was %+v", u, before)
	}
}
