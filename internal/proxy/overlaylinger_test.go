package proxy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// lingeringOverlay runs script as the first run of a root overlay
// workspace that lingers for linger, and returns its envelope and the
// record of the mount it left; the mount is unmounted at the test's end.
func lingeringOverlay(t *testing.T, e *env, linger, script string) (*proxy.Envelope, mountrec.Info) {
	t.Helper()
	e.linger = linger
	first := e.exec(0, "", "--shell", script)
	r := first.Result
	if r.Transport == nil || *r.Transport != "overlay" {
		t.Skipf("auto did not take overlay here: %v %v", r.Transport, r.TransportReason)
	}
	if r.MountReused || !r.MountLingers || r.Mountpoint == nil {
		t.Fatalf("first overlay run: reused %v, lingers %v, mountpoint %v", r.MountReused, r.MountLingers, r.Mountpoint)
	}
	mnt := *r.Mountpoint
	t.Cleanup(func() { e.avfs("", "unmount", mnt) })
	m := e.mounts()
	if len(m) != 1 || !m[0].Live || m[0].Transport != "overlay" || m[0].Mountpoint != mnt || m[0].PID == 0 {
		t.Fatalf("after a lingering overlay run: mounts %+v", m)
	}
	return first, m[0]
}

// changed is a run's change list as path → kind.
func changed(e *proxy.Envelope) map[string]string {
	got := map[string]string{}
	for _, c := range e.Result.Changes {
		got[c.Path] = c.Kind
	}
	return got
}

// TestOverlayLingers: a root overlay run that lingers leaves its
// workspace, served by a process of its own with the linger as its idle
// timeout; the next run reuses it (nothing materialized or mounted) and
// its change list is its own, taken after the server ingested the
// command's writes (a file the first created and the second removed
// included); undo of that run ends the mount and gives back the state
// after the first, and redo its own; a run with another --transport ends the
// lingering mount and mounts anew, and an auto run reuses a lingering
// FUSE mount.
func TestOverlayLingers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rec := lingeringOverlay(t, e, "30s", "mkdir -p src && echo one > src/a && echo x > src/b && echo c > src/c")
	if rec.IdleTimeoutMS != 30000 {
		t.Errorf("the lingering overlay's record: idle timeout %d ms, want 30000", rec.IdleTimeoutMS)
	}
	second := e.exec(0, "", "--shell", "cat src/a; echo two > b; rm src/a; sleep 0.1; echo y >> src/b")
	r := second.Result
	if !r.MountReused || r.Transport == nil || *r.Transport != "overlay" || *r.Mountpoint != rec.Mountpoint || !r.MountLingers {
		t.Fatalf("second run: reused %v, transport %v, mountpoint %v, lingers %v", r.MountReused, r.Transport, r.Mountpoint, r.MountLingers)
	}
	if r.Stdout != "one\n" || r.Overlay != nil {
		t.Errorf("second run: stdout %q, overlay record %+v (want the first's file and nothing materialized)", r.Stdout, r.Overlay)
	}
	if got, want := changed(second), map[string]string{"/b": "added", "/src/a": "deleted", "/src/b": "modified"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second run's changes: %v, want %v", got, want)
	}
	if m := e.mounts(); len(m) != 1 || m[0].PID != rec.PID {
		t.Errorf("after the second run: mounts %+v, want the first's server (pid %d)", m, rec.PID)
	}
	if code, out, errOut := e.avfs("", "--json", "proxy", "undo"); code != 0 {
		t.Fatalf("undo beside a lingering overlay: exit %d %s%s", code, out, errOut)
	}
	if m := e.mounts(); len(m) != 0 {
		t.Errorf("undo left the lingering overlay: %+v", m)
	}
	if code, out, _ := e.avfs("", "cat", "/src/a"); code != 0 || out != "one\n" {
		t.Errorf("after undo of the second run /src/a is %q (exit %d), want the first run's", out, code)
	}
	if code, _, _ := e.avfs("", "cat", "/b"); code == 0 {
		t.Error("undo left the second run's /b")
	}
	// Its writes stand on its checkpoint: redo finds them there.
	if code, out, errOut := e.avfs("", "--json", "proxy", "redo"); code != 0 {
		t.Fatalf("redo of a lingering overlay's run: exit %d %s%s", code, out, errOut)
	}
	if code, out, _ := e.avfs("", "cat", "/b"); code != 0 || out != "two\n" {
		t.Errorf("after redo /b is %q (exit %d)", out, code)
	}
	if code, _, _ := e.avfs("", "cat", "/src/a"); code == 0 {
		t.Error("after redo /src/a, which the second run removed, is back")
	}
	for p, want := range map[string]string{"/src/b": "x\ny\n", "/src/c": "c\n"} {
		if code, out, _ := e.avfs("", "cat", p); code != 0 || out != want {
			t.Errorf("after redo %s is %q (exit %d), want %q", p, out, code, want)
		}
	}

	// Another transport asked for: the lingering overlay ends, its
	// writes kept, and a FUSE mount takes its place; auto reuses that.
	third := e.exec(0, "", "--shell", "echo three > c")
	if third.Result.MountReused || !third.Result.MountLingers {
		t.Fatalf("third run: %+v", third.Result)
	}
	fuse := e.exec(0, "", "--transport", "fuse", "--shell", "cat c")
	r = fuse.Result
	if r.MountReused || r.Transport == nil || *r.Transport != "fuse" || r.Stdout != "three\n" {
		t.Fatalf("a fuse run beside a lingering overlay: reused %v, transport %v, stdout %q", r.MountReused, r.Transport, r.Stdout)
	}
	fmnt := *r.Mountpoint
	t.Cleanup(func() { e.avfs("", "unmount", fmnt) })
	auto := e.exec(0, "", "--", "true")
	if !auto.Result.MountReused || *auto.Result.Transport != "fuse" {
		t.Errorf("an auto run beside a lingering FUSE mount: reused %v, transport %v", auto.Result.MountReused, *auto.Result.Transport)
	}
	if m := e.mounts(); len(m) != 1 || m[0].Transport != "fuse" {
		t.Errorf("mounts after the fuse run: %+v", m)
	}
	e.fsck()
}

// TestOverlayLingerGivesWay: a CLI read beside a lingering overlay sees
// what was written in it, and a CLI write while an overlay run lingers
// makes the idle mount give way: its server ingests the upper (a write
// made in the mount after the run, which no request persisted,
// included) and ends, and the vault holds both its writes and the CLI's.
func TestOverlayLingerGivesWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rec := lingeringOverlay(t, e, "30s", "echo run > r")
	if err := os.WriteFile(filepath.Join(rec.Mountpoint, "late"), []byte("late\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A read beside it sees what was written in it (its server's flush)
	// and leaves it lingering.
	if code, out, errOut := e.avfs("", "cat", "/late"); code != 0 || out != "late\n" {
		t.Errorf("a read beside the lingering overlay: %q (exit %d %s)", out, code, errOut)
	}
	if m := e.mounts(); len(m) != 1 {
		t.Fatalf("a read ended the lingering overlay: %+v", m)
	}
	if code, _, errOut := e.avfs("", "write", "/cli", "cli"); code != 0 {
		t.Fatalf("write beside a lingering overlay: exit %d %s", code, errOut)
	}
	if m := e.mounts(); len(m) != 0 {
		t.Fatalf("the lingering overlay did not give way: %+v", m)
	}
	checkGone(t, rec)
	for p, want := range map[string]string{"/r": "run\n", "/late": "late\n", "/cli": "cli"} {
		if code, out, _ := e.avfs("", "cat", p); code != 0 || out != want {
			t.Errorf("%s after the mount gave way: %q (exit %d), want %q", p, out, code, want)
		}
	}
	e.fsck()
}

// TestOverlayLingerIdleEnd: unused for its linger, the overlay ends by
// itself, its server gone, and the vault holds every write made in it.
func TestOverlayLingerIdleEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rec := lingeringOverlay(t, e, "300ms", "echo run > r")
	if err := os.WriteFile(filepath.Join(rec.Mountpoint, "late"), []byte("late\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; len(e.mounts()) > 0; i++ {
		if i == 500 {
			t.Fatalf("the overlay outlived its idle timeout: %+v", e.mounts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkGone(t, rec)
	for p, want := range map[string]string{"/r": "run\n", "/late": "late\n"} {
		if code, out, _ := e.avfs("", "cat", p); code != 0 || out != want {
			t.Errorf("%s after the idle end: %q (exit %d), want %q", p, out, code, want)
		}
	}
	e.fsck()
}

// TestOverlayLingerBound: a run whose upper grows past the lingering
// bound ends its workspace (ingested and adopted), so the next run is not
// reused and materializes nothing.
func TestOverlayLingerBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lingeringOverlay(t, e, "30s", "true")
	big := e.exec(0, "", "--shell", fmt.Sprintf("mkdir d && cd d && for i in $(seq %d); do : > f$i; done", proxy.LingerMaxEntries+100))
	if !big.Result.MountReused || big.Result.MountLingers {
		t.Fatalf("a run past the bound: reused %v, lingers %v (want reused, then ended)", big.Result.MountReused, big.Result.MountLingers)
	}
	if m := e.mounts(); len(m) != 0 {
		t.Fatalf("a workspace past the bound still lingers: %+v", m)
	}
	next := e.exec(0, "", "--shell", "ls d | wc -l")
	r := next.Result
	if r.MountReused || r.Overlay != nil && r.Overlay.Materialized || strings.TrimSpace(r.Stdout) != fmt.Sprint(proxy.LingerMaxEntries+100) {
		t.Errorf("the run after: reused %v, overlay %+v, stdout %q", r.MountReused, r.Overlay, r.Stdout)
	}
	e.fsck()
}

// TestOverlayLingerKilled: SIGKILL of a lingering overlay's server
// leaves its upper pending; the next command on the vault ingests it,
// losing nothing, and fsck finds the vault clean.
func TestOverlayLingerKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rec := lingeringOverlay(t, e, "30s", "echo run > r")
	if err := os.WriteFile(filepath.Join(rec.Mountpoint, "late"), []byte("late\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	checkGone(t, rec)
	for p, want := range map[string]string{"/late": "late\n", "/r": "run\n"} {
		if code, out, errOut := e.avfs("", "cat", p); code != 0 || out != want {
			t.Errorf("%s after the server was killed: %q (exit %d %s), want %q", p, out, code, errOut, want)
		}
	}
	if mountrec.IsMountpoint(rec.Mountpoint) {
		t.Errorf("the killed server's overlay is still mounted at %s", rec.Mountpoint)
	}
	e.fsck()
	e.avfs("", "mounts", "--prune")
	// The next run starts afresh on the recovered state.
	next := e.exec(0, "", "--shell", "cat late")
	if next.Result.MountReused || next.Result.Stdout != "late\n" {
		t.Errorf("the run after the kill: reused %v, stdout %q", next.Result.MountReused, next.Result.Stdout)
	}
}

// checkGone waits for the server of rec to be gone.
func checkGone(t *testing.T, rec mountrec.Info) {
	t.Helper()
	for i := 0; syscall.Kill(rec.PID, 0) == nil; i++ {
		if i == 500 {
			t.Fatalf("the overlay's server (pid %d) lives on", rec.PID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLingeringOverlayAnswersLinks: the classifier's questions about
// symlinks are answered by a lingering overlay's server from its merged
// dir, the live state: a link the last run made, and one made in the
// merged dir since, are both seen, and a real directory is one.
func TestLingeringOverlayAnswersLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, m := lingeringOverlay(t, e, "30s", "ln -s . b && mkdir d")
	if err := os.Symlink(".", filepath.Join(m.Mountpoint, "c")); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"b/b/b", "c/c"} {
		env := e.exec(14, "", "--cwd", cwd, "--", "cat", "../etc/shadow")
		if env.Result.Decision.Action != "deny" || !strings.Contains(env.Result.Decision.Reason, "climbs above the workspace root") {
			t.Errorf("--cwd %s, cat ../etc/shadow: %+v", cwd, env.Result.Decision)
		}
	}
	if env := e.exec(0, "", "--cwd", "d", "--", "ls", "../b/d"); env.Result.Decision.Action != "allow" || !env.Result.MountReused {
		t.Errorf("ls ../b/d from d: reused %v, %+v", env.Result.MountReused, env.Result.Decision)
	}
}

// TestLingeringOverlaySettles: a run's last writes are too recent for its
// summary's ingest to trust their stat data, so the next persist would
// read them again; the idle server does that on its own once they are
// old enough, so the next run's checkpoint finds the upper settled.
func TestLingeringOverlaySettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, m := lingeringOverlay(t, e, "30s", "mkdir d && echo one > d/a")
	second := e.exec(0, "", "--shell", "echo two > d/b").Result
	if !second.MountReused {
		t.Fatalf("second run did not reuse the lingering mount: %+v", second)
	}
	h, err := registry.Open(e.home)
	if err != nil {
		t.Fatal(err)
	}
	var u mountd.UpperSize
	deadline := time.Now().Add(5 * time.Second)
	for {
		if u, err = mountd.WorkspaceUpper(h, m.Mountpoint); err != nil {
			t.Fatal(err)
		}
		if u.Settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !u.Settled {
		t.Errorf("the lingering overlay did not settle after its run: %+v", u)
	}
	third := e.exec(0, "", "--shell", "cat d/a d/b").Result
	if !third.MountReused || third.Stdout != "one\ntwo\n" {
		t.Errorf("the run after the settle: reused %v, stdout %q", third.MountReused, third.Stdout)
	}
}
