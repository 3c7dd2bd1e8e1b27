package avfs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/avfs"
)

// TestMountRunsTheServerOnce: Home.Mount starts the serving process
// itself (`avfs mount --foreground`), one run of the avfs program, rather
// than running `avfs mount`, which ran the program again to serve. The
// program is a wrapper that logs each run and execs avfs, so the pid it
// logs is the pid of what it became.
func TestMountRunsTheServerOnce(t *testing.T) {
	needMount(t)
	t.Parallel()
	real, err := exec.LookPath("avfs")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath, wrapper := filepath.Join(dir, "runs"), filepath.Join(dir, "avfs-wrapper")
	script := "#!/bin/sh\necho \"$$ $*\" >> " + logPath + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newTestHome(t, avfs.WithBinary(wrapper))
	newVault(t, h, "once")
	ctx := context.Background()
	m, err := h.Mount(ctx, "once", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmount(ctx)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	runs := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(runs) != 1 {
		t.Fatalf("the avfs program ran %d times for one mount: %q", len(runs), runs)
	}
	pid, args, _ := strings.Cut(runs[0], " ")
	if !strings.HasPrefix(args, "mount --foreground ") || pid != strconv.Itoa(m.PID) {
		t.Errorf("the one run is %q (pid %s); want the server, `mount --foreground …`, pid %d", args, pid, m.PID)
	}
	if err := m.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
}
