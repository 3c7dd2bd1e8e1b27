package toolsuite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkips are the posixtest cases a transport does not pass, each
// with the reason.
var posixSkips = map[string]map[string]string{
	"fuse": {
		// As in package fusefs: POSIX record locks belong to a process,
		// and the test takes both of its conflicting locks in one.
		"FcntlFlockLocksFile": "record locks held by two processes (the test uses one)",
	},
	"overlay": {
		// It fails on a local disk too: overlayfs passes locks to it.
		"FcntlFlockLocksFile": "record locks held by two processes (the test uses one)",
	},
}

// TestPosix runs go-fuse's posixtest in one workspace per transport, each
// case in a directory of its own, then checks the vault once it closes.
func TestPosix(t *testing.T) {
	onEach(t, func(t *testing.T, w *workspace) {
		for name, fn := range posixtest.All {
			t.Run(name, func(t *testing.T) {
				if why, ok := posixSkips[w.tr.Name()][name]; ok {
					t.Skip("needs " + why)
				}
				dir := filepath.Join(w.Dir, name)
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				fn(t, dir)
			})
		}
		w.close()
	})
}
