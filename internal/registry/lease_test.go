package registry_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestStoreOneWriter: a vault of a store has one writer across homes; a
// second one gets VaultLocked naming the holder's pid, readers never
// wait, and the vault is free again once the writer closes it.
func TestStoreOneWriter(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := storeHome(t, dsn), storeHome(t, dsn)
	v, err := a.Create("w", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, v, "/f", "1")
	other, err := b.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := readFile(t, other, "/f"); got != "1" {
		t.Fatalf("reader beside the writer reads %q", got)
	}
	err = other.Update(func(tx *vfs.Tx) error { _, err := tx.WriteFile("/g", []byte("2"), 0o644); return err })
	if !errs.Is(err, errs.VaultLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second writer: %v, want VaultLocked naming pid %d", err, os.Getpid())
	}
	if _, err := b.OpenFor("w", true); !errs.Is(err, errs.VaultLocked) {
		t.Fatalf("OpenFor write beside the writer: %v", err)
	}
	ro, err := b.OpenFor("w", false)
	if err != nil {
		t.Fatalf("OpenFor read beside the writer: %v", err)
	}
	ro.Close()
	writeFile(t, v, "/f", "3") // the holder goes on
	v.Close()
	writeFile(t, other, "/g", "2")
	if got := readFile(t, other, "/f") + readFile(t, other, "/g"); got != "32" {
		t.Fatalf("after the first writer closed: %q", got)
	}
}
