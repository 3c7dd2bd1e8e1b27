package proxy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// age makes the runtime dir of a home look made long ago, past prune's
// grace for homes not made yet.
func age(t *testing.T, runDir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(runDir, "home"), old, old); err != nil {
		t.Fatal(err)
	}
}

// newHomeRuntimeDir makes the runtime dir of a new home (which prunes
// the others), removed when the test ends.
func newHomeRuntimeDir(t *testing.T, xdg string) string {
	t.Helper()
	dir, err := proxy.RuntimeDir(filepath.Join(t.TempDir(), "other-home"), xdg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// diskBytes is what the files under dir take on disk.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func vaultID(t *testing.T, home, name string) string {
	t.Helper()
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	return v.ID()
}

// TestPruneTakesGoneHomesCache: the runtime dir of a home that is gone,
// its layer cache holding the entries of a real overlay run, is emptied
// and removed when a new home's runtime dir is made.
func TestPruneTakesGoneHomesCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.exec(0, "", "--transport", "overlay", "--linger", "0", "--shell", "head -c 3000000 /dev/urandom > big && echo x > f").Result
	if r.Overlay == nil || !r.Overlay.Reused {
		t.Fatalf("the run's upper did not become an entry: %+v", r.Overlay)
	}
	runDir, err := proxy.RuntimeDir(e.home, "")
	if err != nil {
		t.Fatal(err)
	}
	held := diskBytes(t, filepath.Join(runDir, "layers"))
	if held < 3000000 {
		t.Fatalf("the layer cache holds %d bytes after the run, want the run's 3 MB", held)
	}
	if err := os.RemoveAll(e.home); err != nil {
		t.Fatal(err)
	}
	age(t, runDir)
	newHomeRuntimeDir(t, "")
	if _, err := os.Lstat(runDir); !os.IsNotExist(err) {
		des, _ := os.ReadDir(filepath.Join(runDir, "layers"))
		var left []string
		for _, d := range des {
			left = append(left, d.Name())
		}
		t.Fatalf("the gone home's runtime dir is left (%v), %d bytes, its cache holding %v", err, diskBytes(t, runDir), left)
	}
	t.Logf("the gone home's %d bytes of layer cache went", held)
}

// TestPruneKeepsWhatIsHeld: in the runtime dir of a home that is gone
// (moved away, as a filesystem not mounted now), prune drops the
// entries nobody holds and the dir of a run that died starting, and
// keeps what a lingering mount holds (its run's dir, its entries, the
// mount itself) and the dir of a crashed run with a pending.json, whose
// writes a crash left un-ingested; the dir stays, knowing whose it is.
func TestPruneKeepsWhatIsHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if code, out, errOut := e.avfs("", "vault", "create", "w"); code != 0 {
		t.Fatalf("vault create: %d %s %s", code, out, errOut)
	}
	if r := e.exec(0, "", "--vault", "w", "--transport", "overlay", "--linger", "0", "--shell", "echo w > w").Result; r.Overlay == nil || !r.Overlay.Reused {
		t.Fatalf("w's run left no entry: %+v", r.Overlay)
	}
	wID, vID := vaultID(t, e.home, "w"), vaultID(t, e.home, "v")
	first, _ := lingeringOverlay(t, e, "30s", "echo v > v")
	mnt := *first.Result.Mountpoint
	runDir, err := proxy.RuntimeDir(e.home, "")
	if err != nil {
		t.Fatal(err)
	}
	layers := filepath.Join(runDir, "layers")
	entries := func(id string) (n int) {
		des, _ := os.ReadDir(layers)
		for _, d := range des {
			if strings.HasPrefix(d.Name(), id+".") {
				n++
			}
		}
		return n
	}
	runs := func() (out []string) {
		des, _ := os.ReadDir(layers)
		for _, d := range des {
			if strings.HasPrefix(d.Name(), ".run-") {
				out = append(out, d.Name())
			}
		}
		return out
	}
	lingering := runs()
	if entries(wID) == 0 || entries(vID) == 0 || len(lingering) != 1 {
		t.Fatalf("before the prune: %d entries of w, %d of v, runs %v", entries(wID), entries(vID), lingering)
	}
	// What crashes left: a run with writes not ingested, and one that
	// died before it wrote its pending.json.
	crashed := filepath.Join(layers, ".run-crashed")
	precious := filepath.Join(crashed, "upper", "precious")
	dead := filepath.Join(layers, ".run-dead")
	for _, d := range []string{filepath.Dir(precious), filepath.Join(dead, "work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(crashed, "pending.json"), []byte(`{"vault_id":"00000000000000000000000000000000","vault":"elsewhere","top":2,"base":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(precious, []byte("a run's write"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dead, old, old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(crashed) })

	away := e.home + "-away"
	if err := os.Rename(e.home, away); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Rename(away, e.home); err != nil {
			t.Error(err)
		}
	})
	// The lingering server settles its last run's racy write meanwhile
	// (Settler): without its home it goes on without the run lock, and
	// makes no skeleton home in the way of the real one coming back.
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Lstat(e.home); !os.IsNotExist(err) {
		t.Errorf("the home that went away is back, not moved back: %v", err)
		_ = os.RemoveAll(e.home)
	}
	age(t, runDir)
	newHomeRuntimeDir(t, "")

	if n := entries(wID); n != 0 {
		t.Errorf("%d entries of w, which nobody holds, are left", n)
	}
	if n := entries(vID); n == 0 {
		t.Error("the lingering mount's entries went")
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("the run that died starting is left: %v", err)
	}
	for _, p := range []string{precious, filepath.Join(layers, lingering[0])} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s went: %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(runDir, "home")); err != nil || string(b) != e.home {
		t.Errorf("the runtime dir left no longer says whose it is: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "v")); err != nil || string(b) != "v\n" {
		t.Errorf("the lingering mount reads %q, %v", b, err)
	}
}

// TestPruneWaitsForNewHomes: the runtime dir of a home that does not
// exist yet (asked for before the home is made) is left by the prune of
// another new home; once older than the grace it goes.
func TestPruneWaitsForNewHomes(t *testing.T) {
	t.Parallel()
	xdg := t.TempDir()
	dir, err := proxy.RuntimeDir(filepath.Join(t.TempDir(), "not-made-yet"), xdg)
	if err != nil {
		t.Fatal(err)
	}
	newHomeRuntimeDir(t, xdg)
	if _, err := os.Lstat(filepath.Join(dir, "home")); err != nil {
		t.Fatalf("a runtime dir made a moment ago, before its home, was pruned: %v", err)
	}
	age(t, dir)
	newHomeRuntimeDir(t, xdg)
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the runtime dir of a home never made is left past the grace: %v", err)
	}
}
