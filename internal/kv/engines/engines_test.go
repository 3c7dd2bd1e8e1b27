package engines_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/bolt"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
)

func TestNames(t *testing.T) {
	if got := engines.Names(); !slices.Equal(got, []string{"sqlite", "bolt"}) {
		t.Fatalf("Names() = %q", got)
	}
	if !slices.Contains(engines.Names(), engines.Default) {
		t.Fatalf("Default %q is not a registered engine", engines.Default)
	}
}

// TestConformance runs the suite on handles, one engine each: created,
// closed, and opened again, so both Create and Open (with detection) are
// on the path. The engines' own packages run it on the bare engines.
func TestConformance(t *testing.T) {
	for _, name := range engines.Names() {
		t.Run(name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kv.Engine {
				path := filepath.Join(t.TempDir(), "v")
				e, err := engines.Create(path, name)
				if err == nil {
					err = e.Close()
				}
				if err == nil {
					e, err = engines.Open(path)
				}
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() != name {
					t.Fatalf("Open detected %q, want %q", e.Name(), name)
				}
				return e
			})
		})
	}
}

func TestNewMemory(t *testing.T) {
	a, b := engines.NewMemory(), engines.NewMemory()
	defer a.Close()
	defer b.Close()
	put(t, a, "k", "v")
	if a.Name() != "mem" || a.Path() != "" {
		t.Errorf("Name, Path = %q, %q", a.Name(), a.Path())
	}
	err := b.View(func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return err })
	if err != kv.ErrNotFound {
		t.Errorf("memory engines share data: %v", err)
	}
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := engines.Create(filepath.Join(dir, "x"), "nosuch"); err == nil {
		t.Fatal("Create with an unknown engine succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Create with an unknown engine left a file behind")
	}
	for _, name := range engines.Names() {
		path := filepath.Join(dir, name)
		e, err := engines.Create(path, name)
		if err != nil {
			t.Fatal(err)
		}
		// Also while the first handle is open.
		if _, err := engines.Create(path, name); !errors.Is(err, os.ErrExist) {
			t.Errorf("%s: Create over an open vault = %v, want os.ErrExist", name, err)
		}
		e.Close()
		if _, err := engines.Create(path, engines.Default); !errors.Is(err, os.ErrExist) {
			t.Errorf("%s: Create over a vault = %v, want os.ErrExist", name, err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
}

// makeVault creates a vault with n keys and closes it.
func makeVault(t *testing.T, path, name string, n int) {
	t.Helper()
	e, err := engines.Create(path, name)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Update(func(tx kv.Tx) error {
		for i := range n {
			if err := tx.Put(fmt.Appendf(nil, "key%06d", i), make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	random := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{3}).Read(random)

	sqlitePath, boltPath := filepath.Join(dir, "s.db"), filepath.Join(dir, "b.db")
	makeVault(t, sqlitePath, "sqlite", 3000)
	makeVault(t, boltPath, "bolt", 3000)
	sqliteData, _ := os.ReadFile(sqlitePath)
	boltData, _ := os.ReadFile(boltPath)
	// bbolt grows files ahead of use (sparse), so halve the used part.
	boltUsed := len(boltData)
	for boltUsed > 0 && boltData[boltUsed-1] == 0 {
		boltUsed--
	}

	tests := []struct {
		name string
		path string
		want string // engine name, or "" with err
		err  error
	}{
		{"sqlite", sqlitePath, "sqlite", nil},
		{"bolt", boltPath, "bolt", nil},
		{"missing", filepath.Join(dir, "nope"), "", os.ErrNotExist},
		{"directory", dir, "", kv.ErrForeign},
		{"empty", file("empty", nil), "", kv.ErrForeign},
		{"text", file("text", []byte("#!/bin/sh\necho this is not a vault, but it is long enough\n")), "", kv.ErrForeign},
		{"random", file("random", random), "", kv.ErrForeign},
		{"sqlite magic prefix", file("short", []byte("SQLite for")), "", kv.ErrForeign},
		{"sqlite 50 bytes", file("s50", sqliteData[:50]), "", kv.ErrCorrupt},
		{"sqlite half", file("shalf", sqliteData[:len(sqliteData)/2]), "", kv.ErrCorrupt},
		{"bolt 50 bytes", file("b50", boltData[:50]), "", kv.ErrCorrupt},
		{"bolt half", file("bhalf", boltData[:boltUsed/2]), "", kv.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := engines.Detect(tc.path)
			if got != tc.want || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
				t.Fatalf("Detect = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
			// Open must agree, and never open a damaged file.
			e, err := engines.Open(tc.path)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Open = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
		})
	}
}

func get(t *testing.T, e kv.Engine, key string) string {
	t.Helper()
	var v []byte
	err := e.View(func(tx kv.Tx) error {
		var err error
		v, err = tx.Get([]byte(key))
		v = slices.Clone(v)
		return err
	})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v)
}

func put(t *testing.T, e kv.Engine, key, value string) {
	t.Helper()
	if err := e.Update(func(tx kv.Tx) error { return tx.Put([]byte(key), []byte(value)) }); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

// TestSharedHandles checks the one-engine-per-file rule and its reference
// counting. bolt shows it best: a second real open of the file would wait
// for the first one's lock.
func TestSharedHandles(t *testing.T) {
	for _, name := range engines.Names() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "v")
			a, err := engines.Create(path, name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := engines.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "link")
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			c, err := engines.Open(link) // same file, other path
			if err != nil {
				t.Fatal(err)
			}
			put(t, a, "k", "1")
			if get(t, c, "k") != "1" {
				t.Fatal("handles do not share the store")
			}
			if a.Path() != c.Path() {
				t.Errorf("Path: %q vs %q", a.Path(), c.Path())
			}

			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); !errors.Is(err, kv.ErrClosed) {
				t.Errorf("second Close = %v, want ErrClosed", err)
			}
			if err := a.View(func(kv.Tx) error { return nil }); !errors.Is(err, kv.ErrClosed) {
				t.Errorf("View on a closed handle = %v", err)
			}
			// The double Close above must not have dropped b's or c's
			// reference.
			put(t, b, "k", "2")
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if get(t, c, "k") != "2" {
				t.Fatal("last handle lost the engine")
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if name == "bolt" {
				// The file lock is gone with the last handle.
				db, err := bolt.Open(path, &bolt.Options{Timeout: 200 * time.Millisecond})
				if err != nil {
					t.Fatalf("file still held after the last Close: %v", err)
				}
				db.Close()
			}
			// Reopening sees what was committed.
			d, err := engines.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if get(t, d, "k") != "2" {
				t.Fatal("reopen lost committed data")
			}
		})
	}
}

func TestConcurrentOpenClose(t *testing.T) {
	for _, name := range engines.Names() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v")
			makeVault(t, path, name, 0)
			const workers, rounds = 6, 15
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					for i := range rounds {
						e, err := engines.Open(path)
						if err == nil {
							err = e.Update(func(tx kv.Tx) error {
								return tx.Put(fmt.Appendf(nil, "w%d/%d", w, i), nil)
							})
							err = errors.Join(err, e.Close())
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			e, err := engines.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			n := 0
			err = e.View(func(tx kv.Tx) error {
				return tx.Scan(nil, nil, func(k, v []byte) (bool, error) { n++; return true, nil })
			})
			if err != nil || n != workers*rounds {
				t.Fatalf("%d keys, %v; want %d", n, err, workers*rounds)
			}
		})
	}
}
