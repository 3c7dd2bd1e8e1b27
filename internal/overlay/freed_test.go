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

// metaOpens watches the entry dirs of c for opens and closes of
// meta.json; the returned func counts those seen since. The kernel merges
// an event into an identical one just before it, so two opens of one
// file in a row count once: a read that ends shows as a close.
func metaOpens(t *testing.T, c *Cache) func() (opens, closes int) {
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
			if _, err := unix.InotifyAddWatch(fd, filepath.Join(c.Root, d.Name()), unix.IN_OPEN|unix.IN_CLOSE); err != nil {
				t.Fatal(err)
			}
		}
	}
	return func() (opens, closes int) {
		buf := make([]byte, 64<<10)
		for {
			m, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				return opens, closes
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= m; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				if string(bytes.TrimRight(name, "\x00")) == "meta.json" {
					if ev.Mask&unix.IN_OPEN != 0 {
						opens++
					}
					if ev.Mask&unix.IN_CLOSE != 0 {
						closes++
					}
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
	if n, _ := opens(); n != 0 {
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

// TestSecondRunOpensEachLowerMetaOnce: a run on a cached state opens the
// meta.json of each entry of its stack once (to lease and read it), and
// no other entry's.
func TestSecondRunOpensEachLowerMetaOnce(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	// Another vault's entry, beside this one's: not this run's to read.
	other, _ := newVault(t, vfs.Quota{})
	if _, err := c.build(Key(other.ID(), 1), func(string, *storeWriter) (MatStats, error) { return MatStats{}, nil }); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if _, err := v.SaveCheckpoint("cp"+string(rune('0'+round)), ""); err != nil {
			t.Fatal(err)
		}
		var opens func() (int, int)
		if round == 2 {
			opens = metaOpens(t, c)
		}
		run, err := c.Start(context.Background(), v, "r", "")
		if err != nil {
			t.Fatal(err)
		}
		if opens != nil {
			// Each lower's file stays open, leased, until the run ends.
			n, closed := opens()
			if n != len(run.Prepared.Lowers) || closed != 0 || run.Prepared.Built {
				run.Discard()
				t.Fatalf("the third run (built %v, %d lowers) opened meta.json %d times and closed it %d times, want once a lower and none closed",
					run.Prepared.Built, len(run.Prepared.Lowers), n, closed)
			}
		}
		if err := os.WriteFile(filepath.Join(run.Merged, "new"), []byte{byte(round)}, 0o644); err != nil {
			run.Discard()
			t.Fatal(err)
		}
		if fin, err := run.Finish(v); err != nil || !fin.Adopted {
			t.Fatalf("round %d: adopted %v, %v", round, fin.Adopted, err)
		}
	}
}
