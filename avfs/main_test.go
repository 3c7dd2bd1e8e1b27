package avfs_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
)

// canMount is true when this host can serve FUSE mounts: root and FUSE.
var canMount bool

// TestMain builds the avfs program (mounts are served by their own avfs
// process) and puts it first on PATH, where the package finds it, as a
// program using the package finds an installed avfs. Every temporary
// directory of the tests and examples lives under one directory, which
// must hold no mount at the end. Without root or FUSE the tests and
// examples that mount are skipped.
func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "avfs-lib-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "avfs"), "github.com/agentvfs/agentvfs/cmd/avfs")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building avfs: %v\n%s", err, out)
		return 1
	}
	os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	work := filepath.Join(tmp, "tmp")
	if err := os.Mkdir(work, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("TMPDIR", work)
	os.Unsetenv("AVFS_HOME")
	os.Unsetenv("AVFS_VAULT")
	os.Unsetenv("AGENTVFS_BIN")
	// Runs unmount after themselves unless a test asks them to linger.
	os.Setenv("AVFS_PROXY_LINGER", "0")

	flag.Parse()
	canMount = os.Geteuid() == 0 && mountd.Available() == nil
	if !canMount {
		skip := "^(ExampleHome_Mount|ExampleHome_Exec)$"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
	}
	code := m.Run()
	if left := mountrec.AvfsMountsUnder(tmp); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: avfs mounts left behind: %v\n", left)
		for _, mnt := range left {
			_ = syscall.Unmount(mnt, mountrec.MNTDetach)
		}
		code = 1
	}
	return code
}

// needMount skips a test that mounts on a host that cannot.
func needMount(t *testing.T) {
	t.Helper()
	if !canMount {
		t.Skip("mounting needs root and FUSE")
	}
}
