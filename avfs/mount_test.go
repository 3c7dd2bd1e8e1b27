package avfs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestMountOverlay: Home.Mount takes the transport and says which
// served; a vault opened while the overlay mount lives sees the host's
// writes, Unmount ingests them, and Discard throws them away.
func TestMountOverlay(t *testing.T) {
	needMount(t)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // the layer cache is this test's
	h := newTestHome(t)
	v := newVault(t, h, "ov")
	ctx := context.Background()
	if err := v.WriteFile(ctx, "/keep", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	v.Close()
	dir := t.TempDir()
	t.Cleanup(func() {
		if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), " "+dir+" ") {
			t.Errorf("%s left mounted", dir)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	m, err := h.Mount(ctx, "ov", dir, &avfs.MountOptions{Transport: avfs.TransportOverlay})
	if err != nil {
		t.Fatal(err)
	}
	if m.Transport != avfs.TransportOverlay || m.TransportReason == "" {
		t.Fatalf("mount %+v", m)
	}
	ms, err := h.Mounts(ctx)
	if err != nil || len(ms) != 1 || ms[0].Transport != "overlay" || !ms[0].Live {
		t.Fatalf("mounts %+v %v", ms, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(path string) ([]byte, error) {
		v, err := h.Open(ctx, "ov")
		if err != nil {
			return nil, err
		}
		defer v.Close()
		return v.ReadFile(ctx, path)
	}
	if b, err := read("/new"); err != nil || string(b) != "new" {
		t.Fatalf("read while mounted: %q %v", b, err)
	}
	if err := m.Unmount(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := read("/new"); err != nil || string(b) != "new" {
		t.Fatalf("read after unmount: %q %v", b, err)
	}

	m, err = h.Mount(ctx, "ov", dir, &avfs.MountOptions{Transport: avfs.TransportOverlay})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dropped"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := read("/dropped"); err != nil { // persisted into the working state
		t.Fatal(err)
	}
	if err := m.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = read("/dropped")
	wantKind(t, err, avfs.NotFound)
	if b, err := read("/new"); err != nil || string(b) != "new" {
		t.Fatalf("discard lost the state from before the mount: %q %v", b, err)
	}
}

// TestMountTransportRefused: an unknown transport and an overlay mount
// with an idle timeout are InvalidInput, before anything is mounted.
func TestMountTransportRefused(t *testing.T) {
	h := newTestHome(t)
	newVault(t, h, "v")
	ctx := context.Background()
	_, err := h.Mount(ctx, "v", t.TempDir(), &avfs.MountOptions{Transport: "nfs"})
	wantKind(t, err, avfs.InvalidInput)
	if os.Geteuid() == 0 {
		_, err = h.Mount(ctx, "v", t.TempDir(), &avfs.MountOptions{Transport: avfs.TransportOverlay, IdleTimeout: time.Minute})
		wantKind(t, err, avfs.InvalidInput)
	}
}
