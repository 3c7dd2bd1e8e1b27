package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

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

// unnamed lists the vault stores of the store at dsn that no name of its
// catalog points to.
func unnamed(t *testing.T, dsn string) []string {
	t.Helper()
	cat, err := engines.OpenAt(dsn, catalogTable)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	named := map[string]bool{}
	if err := cat.View(func(tx kv.Tx) error {
		return tx.Scan([]byte{'v'}, []byte{'w'}, func(_, v []byte) (bool, error) {
			var e storeEntry
			if json.Unmarshal(v, &e) != nil {
				return false, fmt.Errorf("a damaged catalog entry: %q", v)
			}
			named[e.Table] = true
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	stored, err := engines.ListAt(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, st := range stored {
		if vaultStoreRE.MatchString(st.Name) && !named[st.Name] {
			out = append(out, st.Name)
		}
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
	defer v.Close()
	st, err := h.GC(v) // sweeps only what is older than UnnamedAge
	if err != nil || st.UnnamedSwept != 0 {
		t.Fatalf("gc beside a young unnamed vault: swept %d, %v", st.UnnamedSwept, err)
	}
	if n, err := h.SweepUnnamed(UnnamedAge); err != nil || n != 0 {
		t.Fatalf("a young table swept: %d, %v", n, err)
	}
	if eng, err := engines.OpenAt(dsn, table); err != nil {
		t.Fatalf("gc dropped a young unnamed table: %v", err)
	} else {
		eng.Close()
	}
	// A format-1 catalog's mark of an unnamed table: gc takes it out.
	legacy(t, dsn, true)
	// Two hours on, by the server's clock, gc sweeps it and says so.
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(t.Context(), `UPDATE avfs_stores SET created = created - interval '2 hours' WHERE name = $1`, table)
	c.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.GC(v); err != nil || st.UnnamedSwept != 1 {
		t.Fatalf("gc: swept %d, %v; want 1", st.UnnamedSwept, err)
	}
	if legacy(t, dsn, false) {
		t.Error("a format-1 mark is left after gc")
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
	v2, err := h.Open("keep")
	if err != nil {
		t.Fatal(err)
	}
	v2.Close()
}

// legacy reports whether the catalog at dsn holds a format-1 mark of an
// unnamed table, after adding one when add is set.
func legacy(t *testing.T, dsn string, add bool) bool {
	t.Helper()
	cat, err := engines.OpenAt(dsn, catalogTable)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if add {
		if err := cat.Update(func(tx kv.Tx) error {
			return tx.Put([]byte("pv000000000000000000000000"), []byte(`{"since":"2026-01-01T00:00:00Z"}`))
		}); err != nil {
			t.Fatal(err)
		}
	}
	found := false
	if err := cat.View(func(tx kv.Tx) error {
		return kv.ScanKeys(tx, []byte{'p'}, []byte{'q'}, func([]byte) (bool, error) { found = true; return false, nil })
	}); err != nil {
		t.Fatal(err)
	}
	return found
}
