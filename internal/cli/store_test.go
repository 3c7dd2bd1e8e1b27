package cli

import (
	"fmt"
	"path/filepath"
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
