//go:build linux

package overlay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// metaOpens watches the entry dirs of c for opens of meta.json; the
// returned func counts those seen since.
func metaOpens(t *testing.T, c *Cache) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	des, err := os.ReadDir(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range des {
		if d.IsDir() && d.Name()[0] != '.' {
			if _, err := unix.InotifyAddWatch(fd, filepath.Join(c.Root, d.Name()), unix.IN_OPEN); err != nil {
				t.Fatal(err)
			}
		}
	}
	return func() int {
		n := 0
		buf := make([]byte, 64<<10)
		for {
			m, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				return n
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= m; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				if string(bytes.TrimRight(name, "\x00")) == "meta.json" {
					n++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

// TestDropFreedReadsNoMetaWhenNothingIsFreed: the sweep at a run's start
// reads no entry's meta.json while the vault still holds every layer the
// cache has entries of (the usual second run), and still drops an entry
// of a layer the vault no longer holds.
func TestDropFreedReadsNoMetaWhenNothingIsFreed(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	for round := range 2 {
		if _, err := v.SaveCheckpoint("cp"+string(rune('0'+round)), ""); err != nil {
			t.Fatal(err)
		}
		run, err := c.Start(context.Background(), v, "r", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run.Merged, "new"), []byte{byte(round)}, 0o644); err != nil {
			run.Discard()
			t.Fatal(err)
		}
		if fin, err := run.Finish(v); err != nil || !fin.Adopted {
			t.Fatalf("round %d: adopted %v, %v", round, fin.Adopted, err)
		}
	}
	ents, err := c.Entries()
	if err != nil || len(ents) != 3 {
		t.Fatalf("entries %+v, %v: want a base and two deltas", ents, err)
	}
	opens := metaOpens(t, c)
	if err := c.DropFreed(v); err != nil {
		t.Fatal(err)
	}
	if n := opens(); n != 0 {
		t.Fatalf("DropFreed with nothing freed opened meta.json %d times, want 0", n)
	}

	// An entry of a layer the vault does not hold goes.
	stale := Key(v.ID(), 1<<40)
	if _, err := c.build(stale, func(string, *storeWriter) (MatStats, error) { return MatStats{}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.DropFreed(v); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.path(stale)); !os.IsNotExist(err) {
		t.Fatalf("the freed layer's entry stays: %v", err)
	}
	if after, err := c.Entries(); err != nil || len(after) != 3 {
		t.Fatalf("entries after the drop %+v, %v: want the three held ones", after, err)
	}
}
