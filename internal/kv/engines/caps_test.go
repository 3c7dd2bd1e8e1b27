package engines_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/bolt"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

// TestCapsAreTrue checks each engine's SharedOpen against the engine
// itself: a second, independent open of a file held open by a handle
// either writes it (shared) or is refused with kv.ErrBusy (locked).
func TestCapsAreTrue(t *testing.T) {
	second := map[string]func(path string) (kv.Engine, error){
		sqlite.Name: func(p string) (kv.Engine, error) {
			return sqlite.Open(p, &sqlite.Options{BusyTimeout: 200 * time.Millisecond})
		},
		bolt.Name: func(p string) (kv.Engine, error) { return bolt.Open(p, &bolt.Options{Timeout: 200 * time.Millisecond}) },
	}
	for _, name := range engines.Names() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v")
			e, err := engines.Create(path, name)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			caps, ok := engines.Caps(name)
			if !ok {
				t.Fatalf("Caps(%q) unknown", name)
			}
			if got := e.(kv.Capable).Capabilities(); !slices.Equal(got.DataFiles, caps.DataFiles) || got.SharedOpen != caps.SharedOpen {
				t.Fatalf("handle says %+v, registry %+v", got, caps)
			}
			if got, err := engines.CapsOf(path); err != nil || got.SharedOpen != caps.SharedOpen {
				t.Fatalf("CapsOf = %+v, %v", got, err)
			}
			open := second[name]
			if open == nil {
				t.Fatalf("no second opener for engine %q: add one here", name)
			}
			other, err := open(path)
			if caps.SharedOpen {
				if err != nil {
					t.Fatalf("SharedOpen, but a second open failed: %v", err)
				}
				defer other.Close()
				if err := other.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("v")) }); err != nil {
					t.Fatalf("SharedOpen, but a second open cannot write: %v", err)
				}
				return
			}
			if err == nil {
				other.Close()
				t.Fatal("not SharedOpen, but a second open succeeded")
			}
			if !errors.Is(err, kv.ErrBusy) {
				t.Fatalf("second open: %v, want kv.ErrBusy", err)
			}
		})
	}
	if _, ok := engines.Caps("nosuch"); ok {
		t.Error(`Caps("nosuch") is known`)
	}
}

// TestRemoveAndFiles checks the one place that removes a store's files:
// every engine's side files go, files that merely share the prefix stay.
func TestRemoveAndFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v")
	e, err := engines.Create(path, sqlite.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	// While it is open the WAL holds the commit: it counts in the size.
	if got := engines.Files(path); !slices.Equal(got, []string{path, path + "-wal"}) {
		t.Errorf("Files of an open SQLite vault = %q", got)
	}
	e.Close()
	for _, side := range []string{"-wal", "-shm", "-journal"} {
		if err := os.WriteFile(path+side, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(dir, "v-other")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := engines.Remove(path); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if !slices.Equal(left, []string{keep}) {
		t.Errorf("after Remove: %q, want only %q", left, keep)
	}
	if err := engines.Remove(path); err != nil {
		t.Errorf("Remove of a missing store: %v", err)
	}
	if got := engines.Files(keep); !slices.Equal(got, []string{keep}) {
		t.Errorf("Files of a foreign file = %q", got)
	}
}
