package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// storeScripts are the scripts that run a second time with the vaults
// in a PostgreSQL store (AVFS_STORE): create, write, fork, checkpoint,
// diff, merge, quota, fsck, gc and compact. The others test files under
// $AVFS_HOME/vaults (damage, sizes, engines) or need no store.
var storeScripts = []string{
	"checkpoint", "diff", "files", "quota", "maint", "merge", "at", "names",
}

// TestScriptsOnStore runs storeScripts, and testdata/store (the fleet's
// own: several homes on one store, the writer lease across them), each
// script with its own database.
func TestScriptsOnStore(t *testing.T) {
	srv := pgtest.Get(t)
	var files []string
	for _, s := range storeScripts {
		files = append(files, filepath.Join("testdata", "script", s+".txtar"))
	}
	more, _ := filepath.Glob(filepath.Join("testdata", "store", "*.txtar"))
	testscript.Run(t, testscript.Params{
		Files: append(files, more...),
		Setup: func(env *testscript.Env) error {
			env.Setenv("AVFS_HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("AVFS_VAULT", "")
			env.Setenv("GORACE", "atexit_sleep_ms=0")
			db, err := srv.CreateDatabase()
			if err != nil {
				return err
			}
			env.Defer(func() {
				if err := srv.DropDatabase(db); err != nil {
					t.Error(err)
				}
			})
			env.Setenv("AVFS_STORE", srv.DSN(db))
			return nil
		},
		Condition: func(cond string) (bool, error) { return storeCond(cond, true) },
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mkfile": cmdMkfile, "mtime": cmdMtime, "perm": cmdPerm, "mkfifo": cmdMkfifo,
		},
	})
}

// storeCond answers the scripts' [store] condition: whether the vaults
// are in a store.
func storeCond(cond string, store bool) (bool, error) {
	if cond != "store" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	return store, nil
}

// TestStorePasswordNeverPrinted: with the password in the store's
// address, no output names it: vault info and list, mounts, errors, a
// refused password given with --store.
func TestStorePasswordNeverPrinted(t *testing.T) {
	srv := pgtest.Get(t)
	db, err := srv.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.DropDatabase(db) })
	r := newRunner(t)
	r.env["AVFS_STORE"] = srv.PasswordDSN(db, pgtest.Password)
	var outs []string
	run := func(wantCode int, args ...string) {
		t.Helper()
		code, out, errOut := r.run("", args...)
		if code != wantCode {
			t.Fatalf("avfs %v: exit %d, want %d\n%s%s", args, code, wantCode, out, errOut)
		}
		outs = append(outs, out+errOut)
	}
	run(0, "vault", "create", "v", "--use", "--json")
	run(0, "write", "/f", "x", "--json")
	run(0, "vault", "info", "--json")
	run(0, "vault", "info")
	run(0, "vault", "list", "--json")
	run(0, "mounts", "--json")
	run(3, "vault", "info", "absent", "--json")
	run(1, "--store", srv.PasswordDSN(db, "wrong-"+pgtest.Password), "vault", "list", "--json")
	for _, out := range outs {
		if strings.Contains(out, pgtest.Password) {
			t.Errorf("the password is printed:\n%s", out)
		}
	}
	if !strings.Contains(outs[len(outs)-1], `"StoreUnavailable"`) {
		t.Errorf("a refused password: %s", outs[len(outs)-1])
	}
}
