package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Concurrency tests: goroutines on one vault and on several, processes on
// one SQLite vault, and checkpoints and restores under writers.
//
// A bolt vault is used by one process at a time (bbolt holds an exclusive
// flock on the file while it is open), so bolt is tested with goroutines
// only; SQLite serializes writers of different processes with its file
// locks and is tested with processes too.

// bump is one counted change: it increments /counter and creates the file
// p, in the caller's transaction. Every state then holds as many counted
// files as the counter says.
func bump(tx *vfs.Tx, p string) error {
	n, err := readCounter(tx)
	if err != nil {
		return err
	}
	if _, err := tx.WriteFile("/counter", []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		return err
	}
	d, _ := vfs.SplitPath(p)
	if _, err := tx.MkdirAll(d, 0o755); err != nil {
		return err
	}
	_, err = tx.WriteFile(p, []byte(p), 0o644)
	return err
}

func readCounter(tx *vfs.Tx) (int, error) {
	b, err := tx.ReadFile("/counter")
	if errs.Is(err, errs.NotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

// countedFiles counts the files below the directories of the root whose
// names start with prefix, checking each holds its own path.
func countedFiles(tx *vfs.Tx, prefix string, readData bool) (int, error) {
	top, err := tx.ReadDir(vfs.RootIno)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range top {
		if d.Type != vfs.TypeDir || !strings.HasPrefix(d.Name, prefix) {
			continue
		}
		entries, err := tx.ReadDir(d.Ino)
		if err != nil {
			return 0, err
		}
		if !readData {
			n += len(entries)
			continue
		}
		for _, e := range entries {
			p := "/" + d.Name + "/" + e.Name
			b, err := tx.ReadFile(p)
			if err != nil {
				return 0, err
			}
			if string(b) != p {
				return 0, fmt.Errorf("%s holds %q", p, b)
			}
			n++
		}
	}
	return n, nil
}

// checkCounted checks, in one state, that the counter equals the number of
// counted files (and, unless quick, that each holds its path); it returns
// the counter.
func checkCounted(tx *vfs.Tx, prefix string, quick bool) (int, error) {
	c, err := readCounter(tx)
	if err != nil {
		return 0, err
	}
	n, err := countedFiles(tx, prefix, !quick)
	if err != nil {
		return 0, err
	}
	if c != n {
		return 0, fmt.Errorf("counter says %d, %d files", c, n)
	}
	return c, nil
}

func short(n, shortN int) int {
	if testing.Short() {
		return shortN
	}
	return n
}

// runAll runs fn(0..n-1) in goroutines and returns the first error.
func runAll(n int, fn func(i int) error) error {
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errc <- fn(i) })
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestConcurrentUpdatesOneVault(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		workers, updates := 8, short(50, 10)
		var done atomic.Bool
		readErr := make(chan error, 1)
		go func() { // a reader: every snapshot is whole
			var err error
			for !done.Load() && err == nil {
				err = f.v.View(func(tx *vfs.Tx) error { _, err := checkCounted(tx, "g", true); return err })
				time.Sleep(time.Millisecond)
			}
			readErr <- err
		}()
		err := runAll(workers, func(w int) error {
			for k := range updates {
				err := f.v.Update(func(tx *vfs.Tx) error { return bump(tx, fmt.Sprintf("/g%d/f%d", w, k)) })
				if err != nil {
					return err
				}
			}
			return nil
		})
		done.Store(true)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-readErr; err != nil {
			t.Fatalf("reader: %v", err)
		}
		var c int
		f.update(func(tx *vfs.Tx) (err error) { c, err = checkCounted(tx, "g", false); return err })
		if c != workers*updates {
			t.Fatalf("counter = %d after %d updates: lost updates", c, workers*updates)
		}
	})
}

// TestConcurrentVaults runs writers on two vaults and a fork of one of
// them while the fork's parent is checkpointed and compacted.
func TestConcurrentVaults(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			home, err := registry.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			open := func(v *vfs.Vault, err error) *vfs.Vault {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { checkFsck(t, v); v.Close() })
				return v
			}
			a := open(home.Create("a", registry.CreateOptions{Engine: engine}))
			b := open(home.Create("b", registry.CreateOptions{Engine: engine}))
			err = a.Update(func(tx *vfs.Tx) error {
				_, err := tx.WriteFile("/base", bytes.Repeat([]byte("base"), vfs.ChunkSize), 0o644)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			fork := open(home.Fork("a", "fork"))
			vaults := []*vfs.Vault{a, b, fork}
			updates := short(40, 10)
			var writing atomic.Int32
			writing.Store(int32(len(vaults)))
			err = runAll(len(vaults)+1, func(i int) error {
				if i == len(vaults) { // checkpoints and compaction of the fork's parent
					for n := 0; writing.Load() > 0; n++ {
						time.Sleep(2 * time.Millisecond)
						if _, err := a.SaveCheckpoint(fmt.Sprint("c", n), ""); err != nil {
							return err
						}
						if n > 0 {
							if err := a.DeleteCheckpoint(fmt.Sprint("c", n-1)); err != nil {
								return err
							}
						}
						if _, err := a.Compact(); err != nil {
							return err
						}
						if _, err := a.GC(); err != nil {
							return err
						}
					}
					return nil
				}
				defer writing.Add(-1)
				for k := range updates {
					err := vaults[i].Update(func(tx *vfs.Tx) error { return bump(tx, fmt.Sprintf("/w/f%d", k)) })
					if err != nil {
						return fmt.Errorf("%s: %w", vaults[i].Name(), err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vaults {
				err := v.View(func(tx *vfs.Tx) error {
					c, err := checkCounted(tx, "w", false)
					if err == nil && c != updates {
						err = fmt.Errorf("counter = %d, want %d", c, updates)
					}
					return err
				})
				if err != nil {
					t.Fatalf("%s: %v", v.Name(), err)
				}
			}
			if got := readIn(t, fork, "", "/base"); got != strings.Repeat("base", vfs.ChunkSize) {
				t.Fatalf("the fork lost its base file (%d bytes)", len(got))
			}
		})
	}
}

const (
	procEnvHome    = "AVFS_TEST_PROC_HOME"
	procEnvID      = "AVFS_TEST_PROC_ID"
	procEnvUpdates = "AVFS_TEST_PROC_UPDATES"
)

// TestConcurrentProcesses has processes increment one counter in a SQLite
// vault, each increment a read-modify-write in one Update.
func TestConcurrentProcesses(t *testing.T) {
	home, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := home.Create("v", registry.CreateOptions{Engine: "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	procs, updates := 3, short(100, 20)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for id := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentProcessChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), procEnvHome+"="+home.Dir, procEnvID+"="+strconv.Itoa(id),
			procEnvUpdates+"="+strconv.Itoa(updates))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	v, err = home.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	checkFsck(t, v)
	err = v.View(func(tx *vfs.Tx) error {
		c, err := checkCounted(tx, "p", false)
		if err == nil && c != procs*updates {
			err = fmt.Errorf("counter = %d after %d updates: lost updates", c, procs*updates)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentProcessChild is a process of TestConcurrentProcesses.
func TestConcurrentProcessChild(t *testing.T) {
	dir := os.Getenv(procEnvHome)
	if dir == "" {
		t.Skip("helper process of TestConcurrentProcesses")
	}
	id := os.Getenv(procEnvID)
	updates, _ := strconv.Atoi(os.Getenv(procEnvUpdates))
	home, err := registry.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := home.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for k := range updates {
		if err := v.Update(func(tx *vfs.Tx) error { return bump(tx, fmt.Sprintf("/p%s/f%d", id, k)) }); err != nil {
			t.Fatalf("update %d: %v", k, err)
		}
	}
}

// TestCheckpointRestoreWhileWriting saves, restores, deletes checkpoints
// and compacts while writers change the vault and a reader checks every
// state it sees: each state, working or saved, must be whole.
func TestCheckpointRestoreWhileWriting(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		workers, updates := 4, short(40, 10)
		var writing atomic.Int32
		writing.Store(int32(workers))
		var saved []string
		var mu sync.Mutex // guards saved
		err := runAll(workers+2, func(i int) error {
			switch i {
			case workers: // checkpoints, restores, compaction
				for n := 0; writing.Load() > 0; n++ {
					time.Sleep(2 * time.Millisecond)
					name := fmt.Sprint("c", n)
					if _, err := f.v.SaveCheckpoint(name, ""); err != nil {
						return err
					}
					mu.Lock()
					saved = append(saved, name)
					k := n * 7 % len(saved) // an older checkpoint, or this one
					old := saved[k]
					drop := n%4 == 2 && old != name
					if drop {
						saved = slices.Delete(saved, k, k+1)
					}
					mu.Unlock()
					var err error
					switch n % 4 {
					case 1:
						err = f.v.RestoreCheckpoint(old)
					case 2:
						if drop {
							err = f.v.DeleteCheckpoint(old)
						}
						if err == nil {
							_, err = f.v.Compact()
						}
					case 3:
						_, err = f.v.GC()
					}
					if err != nil {
						return err
					}
				}
				return nil
			case workers + 1: // a reader of every state
				for writing.Load() > 0 {
					time.Sleep(time.Millisecond)
					if err := f.v.View(func(tx *vfs.Tx) error { _, err := checkCounted(tx, "w", true); return err }); err != nil {
						return fmt.Errorf("working state: %w", err)
					}
					mu.Lock()
					name := ""
					if len(saved) > 0 {
						name = saved[len(saved)-1]
					}
					mu.Unlock()
					if name == "" {
						continue
					}
					err := f.v.ViewAt(name, func(tx *vfs.Tx) error { _, err := checkCounted(tx, "w", true); return err })
					if err != nil && !errs.Is(err, errs.CheckpointNotFound) {
						return fmt.Errorf("checkpoint %s: %w", name, err)
					}
				}
				return nil
			}
			defer writing.Add(-1)
			for k := range updates {
				if err := f.v.Update(func(tx *vfs.Tx) error { return bump(tx, fmt.Sprintf("/w%d/f%d", i, k)) }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cps, err := f.v.Checkpoints()
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range append(cps, vfs.Checkpoint{}) {
			run := f.v.View
			if cp.Name != "" {
				run = func(fn func(*vfs.Tx) error) error { return f.v.ViewAt(cp.Name, fn) }
			}
			if err := run(func(tx *vfs.Tx) error { _, err := checkCounted(tx, "w", false); return err }); err != nil {
				t.Fatalf("state %q: %v", cp.Name, err)
			}
		}
		if len(cps) == 0 {
			t.Fatal(errors.New("no checkpoint was left to check"))
		}
	})
}
