package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the real avfs binary (avfsBinary) against real
// overlay and FUSE mounts, as root; they leave no mount and no serving
// process behind.

// overlayHost is a home of its own, with a vault "v" holding /keep and
// /old, and an empty mountpoint.
func overlayHost(t *testing.T) (*host, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlay mounts need root")
	}
	h := newHost(t, avfsBinary(t), "")
	h.env = slices.DeleteFunc(h.env, func(e string) bool { return strings.HasPrefix(e, "AVFS_STORE=") })
	// A runtime dir of the test's own: its layer cache and pending
	// uppers are this test's.
	h.env = append(h.env, "XDG_RUNTIME_DIR="+t.TempDir())
	h.ok("vault", "create", "v")
	h.write("v", "/keep", "kept\n")
	h.write("v", "/old", "old\n")
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A server whose end failed still runs: it is this test's.
		for _, m := range h.mountsOf() {
			if m.Live {
				t.Errorf("mount at %s still served (pid %d)", m.Mountpoint, m.PID)
				_ = syscall.Kill(m.PID, syscall.SIGKILL)
			}
		}
		if mounted(mnt) {
			t.Errorf("%s left mounted", mnt)
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return h, mnt
}

func (h *host) write(vault, path, data string) {
	h.t.Helper()
	if code, out, errOut := h.run(data, "--vault", vault, "write", path); code != 0 {
		h.t.Fatalf("write %s: exit %d\n%s%s", path, code, out, errOut)
	}
}

// mountJSON is what `avfs mount --json` prints.
type mountJSON struct {
	PID             int    `json:"pid"`
	Transport       string `json:"transport"`
	TransportReason string `json:"transport_reason"`
}

func (h *host) mount(args ...string) mountJSON {
	h.t.Helper()
	var m mountJSON
	out := h.ok(append([]string{"--json", "mount"}, args...)...)
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.PID == 0 {
		h.t.Fatalf("mount: %v %q", err, out)
	}
	return m
}

// mountsOf lists `avfs mounts --json`.
func (h *host) mountsOf() []struct {
	Mountpoint string `json:"mountpoint"`
	Transport  string `json:"transport"`
	Live       bool   `json:"live"`
	PID        int    `json:"pid"`
} {
	h.t.Helper()
	var r struct {
		Mounts []struct {
			Mountpoint string `json:"mountpoint"`
			Transport  string `json:"transport"`
			Live       bool   `json:"live"`
			PID        int    `json:"pid"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(h.ok("--json", "mounts")), &r); err != nil {
		h.t.Fatal(err)
	}
	return r.Mounts
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// gone waits for process pid to exit.
func gone(pid int) bool {
	for range 200 {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func hostWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOverlayMount: an overlay mount outlives the command that started
// it; what the host writes, deletes and renames through it is in a
// checkpoint saved while it lives and in the vault after unmount, which
// ends its serving process and frees the writer lock.
func TestOverlayMount(t *testing.T) {
	h, mnt := overlayHost(t)
	m := h.mount("v", mnt, "--transport", "overlay")
	if m.Transport != "overlay" || m.TransportReason == "" {
		t.Fatalf("mount result %+v", m)
	}
	ms := h.mountsOf()
	if len(ms) != 1 || ms[0].Transport != "overlay" || !ms[0].Live || ms[0].PID != m.PID {
		t.Fatalf("mounts: %+v", ms)
	}
	if out := h.ok("mounts"); !strings.Contains(out, "TRANSPORT") || !strings.Contains(out, "overlay") {
		t.Fatalf("mounts text:\n%s", out)
	}
	hostWrite(t, filepath.Join(mnt, "new"), "new\n")
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostWrite(t, filepath.Join(mnt, "d", "f"), "f\n")
	if err := os.Remove(filepath.Join(mnt, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "keep"), filepath.Join(mnt, "kept")); err != nil {
		t.Fatal(err)
	}
	// A read-only overlay mount beside it, started before anything
	// read the vault, shows the host's writes too: its start has the
	// read-write mount ingest before it seals the working state.
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	h.mount("--readonly", "v", ro, "--transport", "overlay")
	if b, err := os.ReadFile(filepath.Join(ro, "d", "f")); err != nil || string(b) != "f\n" {
		t.Errorf("read-only overlay beside the mount: %q %v", b, err)
	}
	h.ok("unmount", ro)
	if mounted(ro) {
		t.Fatal("the read-only overlay stayed mounted")
	}
	// A read and a checkpoint of the vault while it is mounted see the
	// host's writes: they ingest first.
	if got := h.ok("--vault", "v", "cat", "/new"); got != "new\n" {
		t.Fatalf("cat while mounted: %q", got)
	}
	h.ok("--vault", "v", "checkpoint", "save", "live")
	// A second writer is refused while the mount lives.
	if code, _, errOut := h.run("x", "--vault", "v", "write", "/x"); code == 0 || !strings.Contains(errOut, "mounted read-write") {
		t.Fatalf("write beside the mount: exit %d %s", code, errOut)
	}
	// Writes after the checkpoint, then the unmount: the ingest goes on
	// from the checkpoint's layer.
	hostWrite(t, filepath.Join(mnt, "after"), "after\n")
	if err := os.Remove(filepath.Join(mnt, "new")); err != nil {
		t.Fatal(err)
	}
	// A file open in the mount: the unmount is refused and the mount
	// stays.
	f, err := os.Open(filepath.Join(mnt, "after"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := h.run("", "--json", "unmount", mnt)
	f.Close()
	if code != exitCode("MountBusy") || !mounted(mnt) {
		t.Fatalf("unmount while a file is open: exit %d %s (mounted %v)", code, out, mounted(mnt))
	}
	var un struct {
		Transport string `json:"transport"`
	}
	if err := json.Unmarshal([]byte(h.ok("--json", "unmount", mnt)), &un); err != nil || un.Transport != "overlay" {
		t.Fatalf("unmount: %v %+v", err, un)
	}
	if mounted(mnt) {
		t.Fatal("still mounted after unmount")
	}
	if !gone(m.PID) {
		t.Fatalf("serving process %d still runs", m.PID)
	}
	if got := h.ok("--vault", "v", "ls", "/"); got != "after\nd\nkept\n" {
		t.Fatalf("vault after unmount:\n%s", got)
	}
	if got := h.ok("--vault", "v", "ls", "/d"); got != "f\n" {
		t.Fatalf("/d after unmount:\n%s", got)
	}
	if got := h.ok("--vault", "v", "ls", "--at", "live", "/"); got != "d\nkept\nnew\n" {
		t.Fatalf("checkpoint saved while mounted:\n%s", got)
	}
	h.ok("--vault", "v", "fsck")
	h.write("v", "/free", "the writer lock is free\n")
	if ms := h.mountsOf(); len(ms) != 0 {
		t.Fatalf("mounts after unmount: %+v", ms)
	}
}

// TestOverlayMountKilled: a serving process killed by SIGKILL frees the
// writer lock, `avfs mounts` shows its mount dead, and the next overlay
// mount of the vault on the same directory ingests what the host wrote
// before the kill, after a checkpoint saved while it lived too.
func TestOverlayMountKilled(t *testing.T) {
	h, mnt := overlayHost(t)
	m := h.mount("v", mnt, "--transport", "overlay")
	hostWrite(t, filepath.Join(mnt, "before-checkpoint"), "saved\n")
	h.ok("--vault", "v", "checkpoint", "save", "live")
	hostWrite(t, filepath.Join(mnt, "before-kill"), "written\n")
	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !gone(m.PID) {
		t.Fatal("the killed server still runs")
	}
	if ms := h.mountsOf(); len(ms) != 1 || ms[0].Live || ms[0].Transport != "overlay" {
		t.Fatalf("mounts after the kill: %+v", ms)
	}
	m2 := h.mount("v", mnt, "--transport", "overlay")
	if got := h.ok("--vault", "v", "cat", "/before-kill"); got != "written\n" {
		t.Fatalf("after recovery: %q", got)
	}
	h.ok("unmount", mnt)
	if !gone(m2.PID) || mounted(mnt) {
		t.Fatal("the second mount did not end")
	}
	if got := h.ok("--vault", "v", "ls", "/"); got != "before-checkpoint\nbefore-kill\nkeep\nold\n" {
		t.Fatalf("vault:\n%s", got)
	}
	h.ok("--vault", "v", "fsck")
}

// TestOverlayMountQuota: an unmount whose ingest the quota refuses fails
// with QuotaExceeded, changes nothing and leaves the mount serving;
// --discard then ends it and gives the vault its state from before the
// mount.
func TestOverlayMountQuota(t *testing.T) {
	h, mnt := overlayHost(t)
	h.ok("--vault", "v", "quota", "set", "max_files", "4")
	m := h.mount("v", mnt, "--transport", "overlay")
	for _, n := range []string{"a", "b", "c", "d"} {
		hostWrite(t, filepath.Join(mnt, n), n)
	}
	code, out, _ := h.run("", "--json", "unmount", mnt)
	if code != exitCode("QuotaExceeded") || !strings.Contains(out, `"QuotaExceeded"`) {
		t.Fatalf("unmount over quota: exit %d %s", code, out)
	}
	if !mounted(mnt) || syscall.Kill(m.PID, 0) != nil {
		t.Fatal("the refused unmount ended the mount")
	}
	if _, err := os.Stat(filepath.Join(mnt, "d")); err != nil {
		t.Fatalf("the mount lost its writes: %v", err)
	}
	if ms := h.mountsOf(); len(ms) != 1 || !ms[0].Live {
		t.Fatalf("mounts after the refused unmount: %+v", ms)
	}
	h.ok("unmount", "--discard", mnt)
	if mounted(mnt) || !gone(m.PID) {
		t.Fatal("unmount --discard left the mount")
	}
	if got := h.ok("--vault", "v", "ls", "/"); got != "keep\nold\n" {
		t.Fatalf("vault after --discard:\n%s", got)
	}
	h.ok("--vault", "v", "fsck")
}

// TestMountAutoIsFUSE: auto mounts FUSE, the live view, and says why.
func TestMountAutoIsFUSE(t *testing.T) {
	h, mnt := overlayHost(t)
	m := h.mount("v", mnt)
	if m.Transport != "fuse" || !strings.Contains(m.TransportReason, "auto") {
		t.Fatalf("auto mount: %+v", m)
	}
	if ms := h.mountsOf(); len(ms) != 1 || ms[0].Transport != "fuse" {
		t.Fatalf("mounts: %+v", ms)
	}
	if code, out, _ := h.run("", "--json", "unmount", "--discard", mnt); code != exitCode("InvalidInput") {
		t.Fatalf("unmount --discard of a FUSE mount: exit %d %s", code, out)
	}
	h.ok("unmount", mnt)
	if !gone(m.PID) || mounted(mnt) {
		t.Fatal("the FUSE mount did not end")
	}
}

// TestOverlayMountNotRoot: asked for overlay, a user who is not root
// gets PermissionDenied saying why, and nothing is mounted.
func TestOverlayMountNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs avfs as another user, which needs root")
	}
	dir, err := os.MkdirTemp("", "avfs-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The built binary's dir is root's own: nobody runs a copy.
	bin := filepath.Join(dir, "avfs")
	b, err := os.ReadFile(avfsBinary(t))
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, bin, "")
	const nobody = 65534
	for _, d := range []string{dir, filepath.Join(dir, "mnt"), filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	h.env = append(slices.DeleteFunc(h.env, func(e string) bool {
		return strings.HasPrefix(e, "AVFS_STORE=") || strings.HasPrefix(e, "AVFS_HOME=")
	}), "AVFS_HOME="+filepath.Join(dir, "home"), "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	h.asUser = nobody
	h.ok("vault", "create", "v")
	code, out, _ := h.run("", "--json", "mount", "v", filepath.Join(dir, "mnt"), "--transport", "overlay")
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if code != exitCode("PermissionDenied") || json.Unmarshal([]byte(out), &e) != nil ||
		e.Error != "PermissionDenied" || !strings.Contains(e.Message, "root") {
		t.Fatalf("overlay as nobody: exit %d %s", code, out)
	}
	if mounted(filepath.Join(dir, "mnt")) {
		t.Fatal("mounted anyway")
	}
}

// TestOverlayMountOwner: an overlay mount started with --owner-pid ends
// when that process exits, and what the host wrote is ingested.
func TestOverlayMountOwner(t *testing.T) {
	h, mnt := overlayHost(t)
	owner := exec.Command("sleep", "60")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	m := h.mount("v", mnt, "--transport", "overlay", "--owner-pid", strconv.Itoa(owner.Process.Pid))
	hostWrite(t, filepath.Join(mnt, "by-owner"), "owned\n")
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	if !gone(m.PID) {
		t.Fatal("the mount outlived its owner")
	}
	if mounted(mnt) {
		t.Fatal("still mounted after the owner exited")
	}
	if got := h.ok("--vault", "v", "cat", "/by-owner"); got != "owned\n" {
		t.Fatalf("after the owner exited: %q", got)
	}
	h.ok("--vault", "v", "fsck")
}
