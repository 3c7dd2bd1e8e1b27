package registry

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

const sweepChildEnv = "AVFS_TEST_SWEEP_CHILD"

// TestSweepChild is the creator TestSweepUnnamed kills: it fills a vault
// table and dies before naming it.
func TestSweepChild(t *testing.T) {
	dsn := os.Getenv(sweepChildEnv)
	if dsn == "" {
		t.Skip("the child of TestSweepUnnamed")
	}
	h, err := OpenWith(t.TempDir(), Options{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = h.place.create("half", "postgres", func(eng kv.Engine) (*vfs.Vault, error) {
		if _, err := vfs.Create(eng, "half", vfs.Quota{}); err != nil {
			t.Fatal(err)
		}
		os.Exit(7) // killed between filling the table and naming it
		return nil, nil
	})
	t.Fatal("create returned")
}

// unnamed lists the tables the store's catalog marks as unnamed.
func unnamed(t *testing.T, dsn string) []string {
	t.Helper()
	cat, err := engines.OpenAt(dsn, catalogTable)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	var out []string
	if err := cat.View(func(tx kv.Tx) error {
		return kv.ScanKeys(tx, []byte{'p'}, []byte{'q'}, func(k []byte) (bool, error) {
			out = append(out, string(k[1:]))
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSweepUnnamed: the table of a creator killed before naming it is
// left while young, and dropped by a sweep once old enough; named vaults
// and a vault deleted whole are untouched and leave no mark.
func TestSweepUnnamed(t *testing.T) {
	dsn := pgtest.DSN(t)
	h, err := OpenWith(filepath.Join(t.TempDir(), "home"), Options{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep", "gone"} {
		v, err := h.Create(name, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
	}
	if err := h.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	if left := unnamed(t, dsn); len(left) != 0 {
		t.Fatalf("create and delete left marks: %v", left)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), sweepChildEnv+"="+dsn)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("the creator: %v\n%s", err, out)
	}
	left := unnamed(t, dsn)
	if len(left) != 1 {
		t.Fatalf("the killed creator left %v", left)
	}
	table := left[0]
	if eng, err := engines.OpenAt(dsn, table); err != nil {
		t.Fatalf("the killed creator's table: %v", err)
	} else {
		eng.Close()
	}

	v, err := h.Open("keep")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.GC(v) // sweeps only what is older than UnnamedAge
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.SweepUnnamed(UnnamedAge); err != nil || n != 0 {
		t.Fatalf("a young table swept: %d, %v", n, err)
	}
	if eng, err := engines.OpenAt(dsn, table); err != nil {
		t.Fatalf("gc dropped a young unnamed table: %v", err)
	} else {
		eng.Close()
	}
	if n, err := h.SweepUnnamed(0); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if _, err := engines.OpenAt(dsn, table); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the swept table: %v", err)
	}
	if left := unnamed(t, dsn); len(left) != 0 {
		t.Fatalf("marks after the sweep: %v", left)
	}
	if names, err := h.Names(); err != nil || len(names) != 1 || names[0] != "keep" {
		t.Fatalf("names after the sweep: %v, %v", names, err)
	}
	v, err = h.Open("keep")
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
}
