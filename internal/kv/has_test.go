package kv_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/bolt"
	"github.com/agentvfs/agentvfs/internal/kv/mem"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

// TestHas checks kv.Has on every engine, through kv.Haser where the
// engine has it and through Get where it does not.
func TestHas(t *testing.T) {
	engines := []struct {
		name string
		open func(t *testing.T) (kv.Engine, error)
	}{
		{"mem", func(t *testing.T) (kv.Engine, error) { return mem.New(), nil }},
		{"sqlite", func(t *testing.T) (kv.Engine, error) {
			return sqlite.Create(filepath.Join(t.TempDir(), "v"), nil)
		}},
		{"bolt", func(t *testing.T) (kv.Engine, error) {
			return bolt.Create(filepath.Join(t.TempDir(), "v"), nil)
		}},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			db, err := e.open(t)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			big := make([]byte, 100<<10)
			if err := db.Update(func(tx kv.Tx) error {
				if err := tx.Put([]byte("big"), big); err != nil {
					return err
				}
				if err := tx.Put([]byte("empty"), nil); err != nil {
					return err
				}
				return tx.Put([]byte("gone"), []byte("x"))
			}); err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{"big": true, "empty": true, "gone": false, "bi": false, "bigger": false}
			check := func(tx kv.Tx) error {
				for k, w := range want {
					got, err := kv.Has(tx, []byte(k))
					if err != nil {
						return err
					}
					if got != w {
						t.Errorf("Has(%q) = %v, want %v", k, got, w)
					}
				}
				return nil
			}
			if err := db.Update(func(tx kv.Tx) error {
				if err := tx.Delete([]byte("gone")); err != nil {
					return err
				}
				return check(tx) // the transaction's own writes
			}); err != nil {
				t.Fatal(err)
			}
			var ended kv.Tx
			if err := db.View(func(tx kv.Tx) error {
				ended = tx
				return check(tx)
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Has(ended, []byte("big")); !errors.Is(err, kv.ErrClosed) {
				t.Errorf("Has after the transaction ended: %v, want kv.ErrClosed", err)
			}
		})
	}
}
