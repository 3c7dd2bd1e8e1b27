//go:build linux

package overlay

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

const (
	crashEnvOp    = "AVFS_OVERLAY_CRASH"
	crashEnvVault = "AVFS_OVERLAY_CRASH_VAULT"
	crashEnvCache = "AVFS_OVERLAY_CRASH_CACHE"
)

// TestCrashChild is the process the crash tests kill: it materializes
// the checkpoint "cp" of a vault, or recovers (ingests) its pending run.
func TestCrashChild(t *testing.T) {
	op := os.Getenv(crashEnvOp)
	if op == "" {
		t.Skip("helper process of the crash tests")
	}
	v, err := openVault(os.Getenv(crashEnvVault))
	if err == nil {
		c := &Cache{Root: os.Getenv(crashEnvCache), Format: Trusted, Layout: Layout(os.Getenv(LayoutEnv))}
		fmt.Println("started")
		switch op {
		case "materialize":
			var l Lease
			var cp vfs.Checkpoint
			if cp, err = v.GetCheckpoint("cp"); err == nil {
				_, err = c.Prepare(context.Background(), v, cp.Layer, &l)
			}
		case "ingest":
			_, err = c.Recover(v)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	fmt.Println("done")
}

func openVault(path string) (*vfs.Vault, error) {
	eng, err := engines.Open(path)
	if err != nil {
		return nil, err
	}
	return vfs.Open(eng, nil)
}

// crashChild runs TestCrashChild for op and SIGKILLs it delay after it
// opened the vault (never, when delay is 0). It returns how long the
// child's work ran and whether the child finished first.
func crashChild(t *testing.T, op, vault string, c *Cache, delay time.Duration) (time.Duration, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvOp+"="+op, crashEnvVault+"="+vault, crashEnvCache+"="+c.Root, LayoutEnv+"="+string(c.Layout))
	var errOut strings.Builder
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var start time.Time
	var timer <-chan time.Time
	finished, killed := false, false
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				if err != nil && !finished && !killed {
					t.Fatalf("child failed: %v\n%s", err, errOut.String())
				}
				return time.Since(start), finished
			}
			switch l {
			case "started":
				start = time.Now()
				if delay > 0 {
					timer = time.After(delay)
				}
			case "done":
				finished = true
			}
		case <-timer:
			_ = cmd.Process.Kill()
			timer, killed = nil, true
		}
	}
}

// bigTree writes n small files in 20 dirs.
func bigTree(t testing.TB, dir string, n int) {
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i%20))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashDuringMaterialize: a process killed while it materializes a
// layer leaves no entry a run could use half-written; the next Prepare
// builds a whole one, and Prune takes the remains away. In the Shared
// layout no data file is half written either: the entries' and the
// rebuilt layer's contents are read through mounts, from the store.
func TestCrashDuringMaterialize(t *testing.T) { forLayouts(t, testCrashDuringMaterialize) }

func testCrashDuringMaterialize(t *testing.T, l Layout) {
	needRoot(t)
	v, path := newVault(t, vfs.Quota{})
	src := t.TempDir()
	bigTree(t, src, 1000)
	importDir(t, v, src)
	if _, err := v.SaveCheckpoint("cp", ""); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, src, snapOpts{times: true})
	full, _ := crashChild(t, "materialize", path, newCache(t, l), 0)
	killed := 0
	kills := crashKills(l)
	for i := range kills {
		c := newCache(t, l)
		if i%2 == 1 && l == Shared {
			// Half the kills land on a store that holds part of the data
			// already, from a whole build of another vault.
			seedStore(t, c, src)
		}
		delay := full * time.Duration(i+1) / time.Duration(kills+1)
		if _, done := crashChild(t, "materialize", path, c, delay); !done {
			killed++
		}
		// Whatever the kill left, the cache holds whole entries only.
		ents, err := c.Entries()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Key == seedKey {
				continue
			}
			var el Lease
			lowers, ok := c.stack(e.Key, &el)
			if !ok {
				t.Fatalf("entry %s cannot be stacked", e.Key)
			}
			got := snapshotStack(t, lowers, prepData(c), snapOpts{times: true})
			el.Release()
			if d := diffLines(want, got); d != "" {
				t.Fatalf("kill after %v left a partial entry %s:\n%.2000s", delay, e.Key, d)
			}
		}
		var l Lease
		cp, err := v.GetCheckpoint("cp")
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Prepare(context.Background(), v, cp.Layer, &l)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		if d := diffLines(want, snapshotStack(t, p.Lowers, p.Data, snapOpts{times: true})); d != "" {
			t.Fatalf("the layer built after the kill differs:\n%.2000s", d)
		}
		if _, err := c.Prune(); err != nil {
			t.Fatal(err)
		}
		if m, _ := filepath.Glob(filepath.Join(c.Root, ".tmp-*")); len(m) > 0 {
			t.Fatalf("prune left %v", m)
		}
	}
	if killed == 0 {
		t.Fatal("no child was killed while materializing: the test tested nothing")
	}
	t.Logf("%d of %d children killed while materializing (a whole one took %v)", killed, kills, full)
}

// TestCrashDuringIngest: a process killed while it ingests a run's upper
// leaves the vault fsck clean with either nothing or all of the run, and
// the next Recover ingests the rest exactly once.
func TestCrashDuringIngest(t *testing.T) { forLayouts(t, testCrashDuringIngest) }

func testCrashDuringIngest(t *testing.T, l Layout) {
	needRoot(t)
	killed := 0
	var full time.Duration
	kills := crashKills(l)
	for i := range kills + 1 {
		v, path := newVaultFile(t, vfs.Quota{})
		c := newCache(t, l)
		src := t.TempDir()
		sampleTree(t, src)
		importDir(t, v, src)
		before := snapshot(t, materializeTo(t, v), snapOpts{times: true})
		if _, err := v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		run, err := c.Start(context.Background(), v, fmt.Sprint(i), "")
		if err != nil {
			t.Fatal(err)
		}
		bigTree(t, run.Merged, 1000)
		if err := os.RemoveAll(filepath.Join(run.Merged, "gone")); err != nil {
			t.Fatal(err)
		}
		after := snapshot(t, run.Merged, snapOpts{times: true})
		if err := Unmount(run.Merged); err != nil { // the run's process dies here
			t.Fatal(err)
		}
		run.mounted = false
		run.lease.Release()
		v.Close()

		// The first child runs whole: its time spaces the kills.
		delay := full * time.Duration(i) / time.Duration(kills+1)
		took, done := crashChild(t, "ingest", path, c, delay)
		if i == 0 {
			full = took
		}
		if !done {
			killed++
		}
		v2, err := openVault(path)
		if err != nil {
			t.Fatal(err)
		}
		checkFsck(t, v2)
		got := snapshot(t, materializeTo(t, v2), snapOpts{times: true})
		if diffLines(got, before) != "" && diffLines(got, after) != "" {
			t.Fatalf("kill after %v left part of the run:\n%.3000s", delay, diffLines(after, got))
		}
		if pend := c.Pending(v2.ID()); diffLines(got, after) != "" && len(pend) == 0 {
			t.Fatalf("the run is not in the vault and no pending upper says so")
		}
		if _, err := c.Recover(v2); err != nil {
			t.Fatal(err)
		}
		if d := diffLines(after, snapshot(t, materializeTo(t, v2), snapOpts{times: true})); d != "" {
			t.Fatalf("after recovery the vault differs from what the run left:\n%.3000s", d)
		}
		if pend := c.Pending(v2.ID()); len(pend) != 0 {
			t.Fatalf("pending after recovery: %v", pend)
		}
		checkFsck(t, v2)
		v2.Close()
	}
	if killed == 0 {
		t.Fatal("no child was killed while ingesting: the test tested nothing")
	}
	t.Logf("%d of %d children killed while ingesting (a whole ingest took %v)", killed, kills, full)
}

// seedKey is the entry seedStore builds.
const seedKey = "seed.1"

// seedStore builds into c an entry of another vault holding half of
// tree src (every other top-level dir): its data files are in the store.
func seedStore(t *testing.T, c *Cache, src string) {
	t.Helper()
	half := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range des {
		if i%2 == 0 {
			if err := copyTree(filepath.Join(src, d.Name()), filepath.Join(half, d.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, _ := newVault(t, vfs.Quota{})
	importDir(t, v, half)
	if _, err := c.build(seedKey, func(tree string, s *storeWriter) (MatStats, error) {
		var st MatStats
		err := v.View(func(tx *vfs.Tx) (err error) {
			st, err = materialize(context.Background(), tx, tree, s)
			return err
		})
		return st, err
	}); err != nil {
		t.Fatal(err)
	}
}

// prepData is the data layers a mount of c's entries stacks.
func prepData(c *Cache) []string {
	if c.Layout == Shared {
		return []string{c.storeRoot()}
	}
	return nil
}

// crashKills is how many children a crash test kills: fewer in the
// Shared layout, whose ingest is the Copies one, so that the package
// stays within go test's timeout under -race on a small machine.
func crashKills(l Layout) int {
	if l == Shared {
		return 3
	}
	return 5
}
