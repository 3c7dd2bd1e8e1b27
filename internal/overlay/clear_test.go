//go:build linux

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestClearKeepsWhatIsHeld: Clear of a cache drops the entries nobody
// holds, deltas and the bases below them, the temporary dirs, the dirs of
// runs that crashed while starting, and the store files only dropped
// entries named; a live run's mount, the entries it leases and their
// data, a run dir with a pending.json, and a run dir that may be starting
// stay, and so does the cache's dir. With those gone, the next Clear
// takes the dir.
func TestClearKeepsWhatIsHeld(t *testing.T) { forLayouts(t, testClearKeepsWhatIsHeld) }

func testClearKeepsWhatIsHeld(t *testing.T, l Layout) {
	needRoot(t)
	c := newCache(t, l)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Vault a: a base and two deltas over it, nobody holding them.
	a, _ := newVault(t, vfs.Quota{})
	srcA := t.TempDir()
	sampleTree(t, srcA)
	must(os.WriteFile(filepath.Join(srcA, "only-a"), []byte("only in a"), 0o644))
	importDir(t, a, srcA)
	for i := range 2 {
		run, err := c.Start(context.Background(), a, "a"+string(rune('0'+i)), "")
		must(err)
		must(os.WriteFile(filepath.Join(run.Merged, "f"), []byte{byte(i)}, 0o644))
		fin, err := run.Finish(a)
		must(err)
		if !fin.Adopted {
			t.Fatalf("run %d of a: the upper was not adopted", i)
		}
	}
	// Vault b: a live run, mounted, leasing b's base.
	b, _ := newVault(t, vfs.Quota{})
	srcB := t.TempDir()
	sampleTree(t, srcB)
	importDir(t, b, srcB)
	live, err := c.Start(context.Background(), b, "live", "")
	must(err)
	defer live.Discard()
	must(os.WriteFile(filepath.Join(live.Merged, "new"), []byte("written by the live run"), 0o644))
	// What a crash left: a run with a pending.json and writes in its
	// upper, a run that died before writing one (an hour ago), one that
	// is starting now, and a half-built entry.
	crashed := filepath.Join(c.Root, runPrefix+"crashed")
	must(os.MkdirAll(filepath.Join(crashed, "upper"), 0o755))
	must(os.WriteFile(filepath.Join(crashed, "pending.json"), []byte(`{"vault_id":"`+a.ID()+`","top":9,"base":8}`), 0o600))
	must(os.WriteFile(filepath.Join(crashed, "upper", "precious"), []byte("a run's write"), 0o644))
	dead := filepath.Join(c.Root, runPrefix+"dead")
	must(os.MkdirAll(filepath.Join(dead, "work"), 0o755))
	hourAgo := time.Now().Add(-time.Hour)
	must(os.Chtimes(dead, hourAgo, hourAgo))
	starting := filepath.Join(c.Root, runPrefix+"starting")
	must(os.Mkdir(starting, 0o755))
	tmp := filepath.Join(c.Root, ".tmp-half")
	must(os.MkdirAll(filepath.Join(tmp, "tree"), 0o755))

	before, err := c.Entries()
	must(err)
	store := len(storeFiles(t, c))
	gone, err := c.Clear()
	must(err)
	if gone {
		t.Fatal("Clear removed the cache's dir under a live run")
	}
	after, err := c.Entries()
	must(err)
	var keys []string
	for _, e := range after {
		keys = append(keys, e.Key)
		if !strings.HasPrefix(e.Key, b.ID()+".") {
			t.Errorf("entry %s of vault a, which nobody holds, is left", e.Key)
		}
	}
	if len(keys) != 1 || c.Tree(keys[0]) != live.Prepared.Lowers[0] {
		t.Errorf("%d entries -> %v; want the live run's lower %s alone", len(before), keys, live.Prepared.Lowers[0])
	}
	for _, p := range []string{crashed, filepath.Join(crashed, "upper", "precious"), starting, live.Dir} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s went: %v", p, err)
		}
	}
	for _, p := range []string{dead, tmp} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left (%v)", p, err)
		}
	}
	if got, want := snapshot(t, live.Merged, snapOpts{}), snapshot(t, srcB, snapOpts{}); len(got) != len(want)+1 {
		t.Errorf("the live run's mount shows %d names, want %d", len(got), len(want)+1)
	}
	if data, err := os.ReadFile(filepath.Join(live.Merged, "big.bin")); err != nil || len(data) != 20*vfs.ChunkSize+123 {
		t.Errorf("the live run's big.bin: %d bytes, %v", len(data), err)
	}
	if l == Shared {
		if got := len(storeFiles(t, c)); got != store-1 {
			t.Errorf("store files %d -> %d; want only-a's freed, the live run's kept", store, got)
		}
	}

	// Once the live run is gone and the crashed one recovered, nothing
	// is left but bookkeeping, and the dir goes.
	must(live.Discard())
	must(os.RemoveAll(crashed))
	must(os.Chtimes(starting, hourAgo, hourAgo))
	gone, err = c.Clear()
	must(err)
	if des, _ := os.ReadDir(c.Root); !gone || len(des) != 0 {
		var names []string
		for _, d := range des {
			names = append(names, d.Name())
		}
		slices.Sort(names)
		t.Fatalf("second Clear: gone %v, left %v", gone, names)
	}
	if _, err := os.Lstat(c.Root); !os.IsNotExist(err) {
		t.Fatalf("the cache's dir is left: %v", err)
	}
}

// TestPruneTakesRunsThatNeverStarted: Prune, on a cache in use, removes a
// run dir a crash left before its pending.json (a minute old, nothing
// mounted), and leaves one that may be starting now, one with a
// pending.json and a live run's.
func TestPruneTakesRunsThatNeverStarted(t *testing.T) {
	needRoot(t)
	c := newCache(t, Copies)
	v, _ := newVault(t, vfs.Quota{})
	importDir(t, v, t.TempDir())
	live, err := c.Start(context.Background(), v, "live", "")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Discard()
	dead, starting, pendingRun := filepath.Join(c.Root, runPrefix+"dead"), filepath.Join(c.Root, runPrefix+"starting"), filepath.Join(c.Root, runPrefix+"pending")
	for _, d := range []string{dead, starting, pendingRun} {
		if err := os.MkdirAll(filepath.Join(d, "upper"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pendingRun, "pending.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour)
	for _, d := range []string{dead, pendingRun, live.Dir} {
		if err := os.Chtimes(d, hourAgo, hourAgo); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a run dir that never started is left: %v", err)
	}
	for _, d := range []string{starting, pendingRun, live.Dir} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s is gone: %v", filepath.Base(d), err)
		}
	}
	if !isMountpoint(live.Merged) {
		t.Errorf("the live run was unmounted")
	}
}
