package sqlite_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

// TestNewVaultsReclaimIncrementally checks that a new database can give
// space back a bounded piece at a time.
func TestNewVaultsReclaimIncrementally(t *testing.T) {
	db, _ := newDB(t, nil)
	sp, err := db.Space()
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Incremental {
		t.Fatal("a new database is not auto_vacuum=INCREMENTAL")
	}
}

// TestRewriteMigratesOldVaults opens a database made by the template of
// the builds before auto_vacuum (testdata), where freed pages could never
// leave the file, and checks that Rewrite gives them back and makes the
// file incremental for good.
func TestRewriteMigratesOldVaults(t *testing.T) {
	old, err := os.ReadFile("testdata/template-noautovacuum.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	big := bytes.Repeat([]byte{7}, 64<<10)
	if err := db.Update(func(tx kv.Tx) error {
		for i := range 256 {
			if err := tx.Put(fmt.Appendf(nil, "k%d", i), big); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx kv.Tx) error {
		for i := 1; i < 256; i++ {
			if err := tx.Delete(fmt.Appendf(nil, "k%d", i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sp, err := db.Space()
	if err != nil {
		t.Fatal(err)
	}
	if sp.Incremental || sp.FreeBytes < 8<<20 {
		t.Fatalf("old database: %+v, want not incremental with 16 MiB free", sp)
	}
	if n, err := db.Reclaim(0); err != nil || n != 0 {
		t.Fatalf("Reclaim on an old database = %d, %v; want 0, nil", n, err)
	}
	if err := db.Rewrite(); err != nil {
		t.Fatal(err)
	}
	sp, err = db.Space()
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Incremental || sp.FreeBytes != 0 {
		t.Fatalf("after Rewrite: %+v, want incremental, nothing free", sp)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1<<20 {
		t.Fatalf("database file %d bytes after Rewrite", fi.Size())
	}
	if err := db.View(func(tx kv.Tx) error {
		v, err := tx.Get([]byte("k0"))
		if err == nil && !bytes.Equal(v, big) {
			err = fmt.Errorf("k0 changed")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
