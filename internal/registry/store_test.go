package registry_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// storeHome opens a new home whose vaults are in the store at dsn: each
// call is another host.
func storeHome(t *testing.T, dsn string) *registry.Home {
	t.Helper()
	h, err := registry.OpenWith(filepath.Join(t.TempDir(), "home"), registry.Options{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func writeFile(t *testing.T, v *vfs.Vault, p, data string) {
	t.Helper()
	if err := v.Update(func(tx *vfs.Tx) error { _, err := tx.WriteFile(p, []byte(data), 0o644); return err }); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, v *vfs.Vault, p string) string {
	t.Helper()
	var b []byte
	if err := v.View(func(tx *vfs.Tx) (err error) { b, err = tx.ReadFile(p); return err }); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStoreSharedByHomes: a vault made by one home is seen, forked and
// guarded by another that names the same store; the current vault stays
// per home, and nothing lands under either home's vaults/.
func TestStoreSharedByHomes(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := storeHome(t, dsn), storeHome(t, dsn)
	base, err := a.Create("base", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if base.Engine().Name() != "postgres" {
		t.Fatalf("engine %s", base.Engine().Name())
	}
	writeFile(t, base, "/f", "from a")
	base.Close()
	if err := a.Use("base"); err != nil {
		t.Fatal(err)
	}
	list, err := b.List()
	if err != nil || len(list) != 1 || list[0].Name != "base" || list[0].Current {
		t.Fatalf("b.List() = %+v, %v", list, err)
	}
	if _, err := b.Current(); !errs.Is(err, errs.NoActiveVault) {
		t.Fatalf("b's current vault: %v (a's must not be b's)", err)
	}
	fork, err := b.Fork("base", "f1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, fork, "/g", "from b")
	fork.Close()
	f1, err := a.Open("f1")
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, f1, "/f") + "," + readFile(t, f1, "/g"); got != "from a,from b" {
		t.Fatalf("a reads b's fork: %q", got)
	}
	f1.Close()
	if err := a.Delete("base"); !errs.Is(err, errs.VaultHasForks) {
		t.Fatalf("delete of a base another home forked: %v", err)
	}
	if _, err := a.Create("f1", registry.CreateOptions{}); !errs.Is(err, errs.VaultExists) {
		t.Fatalf("create of a name another home took: %v", err)
	}
	if _, err := a.Create("x", registry.CreateOptions{Engine: "sqlite"}); !errs.Is(err, errs.InvalidInput) {
		t.Fatalf("a file engine in a store: %v", err)
	}
	if err := a.Delete("f1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete("base"); err != nil {
		t.Fatal(err)
	}
	if names, err := a.Names(); err != nil || len(names) != 0 {
		t.Fatalf("names after delete: %v, %v", names, err)
	}
	if _, err := b.Open("base"); !errs.Is(err, errs.VaultNotFound) {
		t.Fatalf("open of a deleted vault: %v", err)
	}
	for _, h := range []*registry.Home{a, b} {
		if e, _ := os.ReadDir(filepath.Join(h.Dir, "vaults")); len(e) != 0 {
			t.Errorf("files under %s/vaults: %v", h.Dir, e)
		}
	}
	if n := tables(t, dsn); n != 0 {
		t.Errorf("%d vault tables left after every vault was deleted", n)
	}
}

// tables counts the vault stores of the store at dsn.
func tables(t *testing.T, dsn string) int {
	t.Helper()
	s := pgtest.Get(t)
	n, err := s.QueryInt(dbName(dsn), `SELECT count(*) FROM avfs_stores WHERE name ~ '^v[0-9a-f]{24}$'`)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func dbName(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "@/")
	name, _, _ := strings.Cut(rest, "?")
	return name
}

// TestStoreConcurrentCreateOneWins: homes creating one name at once in
// one store: exactly one wins, the others get VaultExists and leave no
// table behind.
func TestStoreConcurrentCreateOneWins(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, exists := 0, 0
	for range n {
		h := storeHome(t, dsn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := h.Create("same", registry.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
				v.Close()
			case errs.Is(err, errs.VaultExists):
				exists++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || exists != n-1 {
		t.Fatalf("%d won, %d got VaultExists", wins, exists)
	}
	if got := tables(t, dsn); got != 1 {
		t.Fatalf("%d vault tables, want 1", got)
	}
}

// TestStoreFromConfig: config.toml's store puts the vaults in it; a key
// it does not know is refused rather than read as "files".
func TestStoreFromConfig(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, registry.ConfigFile)
	if err := os.WriteFile(cfg, []byte("store = \""+dsn+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := registry.OpenWith(dir, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Store == "" || strings.Contains(h.Store, "?") {
		t.Fatalf("Store = %q", h.Store)
	}
	v, err := h.Create("c", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	if names, _ := storeHome(t, dsn).Names(); len(names) != 1 || names[0] != "c" {
		t.Fatalf("another home of the store lists %v", names)
	}
	if err := os.WriteFile(cfg, []byte("stor = \"postgres://u:pw-in-toml@h/db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.OpenWith(dir, registry.Options{}); !errs.Is(err, errs.InvalidInput) || strings.Contains(err.Error(), "pw-in-toml") {
		t.Fatalf("unknown key: %v", err)
	}
	if err := os.WriteFile(cfg, []byte("store = \"postgres://u:pw-in-toml@h/db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.OpenWith(dir, registry.Options{}); !errs.Is(err, errs.InvalidInput) || strings.Contains(err.Error(), "pw-in-toml") {
		t.Fatalf("bad TOML: %v", err)
	}
}

// TestStoreBadAddresses: every wrong store is a typed error, nothing is
// created, and the password is in no message.
func TestStoreBadAddresses(t *testing.T) {
	s := pgtest.Get(t)
	dsn := pgtest.DSN(t)
	db := dbName(dsn)
	foreign, future := pgtest.DSN(t), pgtest.DSN(t)
	if err := s.Exec(dbName(foreign), "CREATE TABLE invoices (id int)"); err != nil {
		t.Fatal(err)
	}
	h := storeHome(t, future)
	v, err := h.Create("v", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	if err := s.Exec(dbName(future), "UPDATE avfs_meta SET value = '99' WHERE key = 'format'"); err != nil {
		t.Fatal(err)
	}
	const pw = "wrong-pw-never-printed"
	cases := []struct {
		name, dsn string
		kind      errs.Kind
	}{
		{"wrong password", s.PasswordDSN(db, pw), errs.StoreUnavailable},
		{"no server", "postgres://avfs:" + pw + "@/avfs?host=/nonexistent&connect_timeout=2", errs.StoreUnavailable},
		{"no database", strings.Replace(s.PasswordDSN(db, pgtest.Password), "/"+db+"?", "/nodb?", 1) + "&x=" + pw, errs.StoreUnavailable},
		{"foreign database", foreign + "&password=" + pw, errs.CorruptVault},
		{"future format", future + "&password=" + pw, errs.UnsupportedFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := storeHome(t, c.dsn)
			_, err := h.Create("n", registry.CreateOptions{})
			if errs.KindOf(err) != c.kind {
				t.Errorf("create: %v, want %s", err, c.kind)
			}
			_, lerr := h.List()
			if errs.KindOf(lerr) != c.kind {
				t.Errorf("list: %v, want %s", lerr, c.kind)
			}
			for _, e := range []error{err, lerr} {
				if e != nil && strings.Contains(fmt.Sprintf("%v %+v", e, e), pw) {
					t.Errorf("the password is printed: %v", e)
				}
			}
		})
	}
	if n, err := s.QueryInt(dbName(foreign), "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"); err != nil || n != 1 {
		t.Errorf("the foreign database has %d tables (%v), want its own 1", n, err)
	}
	if _, err := registry.OpenWith(t.TempDir(), registry.Options{Store: "mysql://u:" + pw + "@h/db"}); !errs.Is(err, errs.InvalidInput) || strings.Contains(err.Error(), pw) {
		t.Errorf("a foreign address: %v", err)
	}
}

// TestStoreForkCommits: a fork through a home on a store costs three
// write transactions on the server (the parent's pin, the fork's first
// keys with its store's row, its name in the catalog) and no DDL.
func TestStoreForkCommits(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := storeHome(t, dsn)
	v, err := h.Create("base", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, v, "/a", "a")
	v.Close()
	s := pgtest.Get(t)
	// Every write transaction takes a transaction id; txid_current takes
	// one for the asking, too.
	xid := func() int {
		n, err := s.QueryInt(dbName(dsn), "SELECT txid_current()::int")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ddl := func() int {
		n, err := s.QueryInt(dbName(dsn), "SELECT count(*) FROM pg_class")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 3 {
		before, classes := xid(), ddl()
		f, err := h.Fork("base", fmt.Sprintf("f%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, f, "/a"); got != "a" {
			t.Errorf("the fork reads %q", got)
		}
		f.Close()
		if n := xid() - before - 1; n > 3 {
			t.Errorf("fork %d: %d write transactions, want at most 3", i, n)
		}
		if n := ddl() - classes; n != 0 {
			t.Errorf("fork %d: %d relations made", i, n)
		}
	}
}
