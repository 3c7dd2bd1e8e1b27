package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

func TestModes(t *testing.T) {
	probe := unavailable("no bubblewrap here")
	if _, err := New(On, Config{}, "", probe); !errs.Is(err, Unavailable) {
		t.Errorf("on without isolation: %v", err)
	}
	p, err := New(Auto, Config{}, "", probe)
	if err != nil || p.Isolated() || p.Isolation.Mode != None || !strings.Contains(p.Isolation.Reason, "no bubblewrap here") {
		t.Errorf("auto without isolation: %+v %v", p, err)
	}
	if got := p.Wrap([]string{"true"}, "/", 3); !slices.Equal(got, []string{"true"}) {
		t.Errorf("a plan without isolation wraps: %v", got)
	}
	p, err = New(Off, Config{}, "/usr/bin/bwrap", nil)
	if err != nil || p.Isolated() || p.Isolation.Requested != "off" {
		t.Errorf("off: %+v %v", p, err)
	}
	if _, err := ParseMode("maybe"); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("--isolate maybe: %v", err)
	}
}

// TestPlan: what is hidden, bound and made read-only, in an order where
// the workspace survives a hidden dir that holds it.
func TestPlan(t *testing.T) {
	root := t.TempDir()
	home, ah, run := filepath.Join(root, "home"), filepath.Join(root, "home", ".avfs"), filepath.Join(root, "run")
	ws := filepath.Join(run, "mnt", "v")
	for _, d := range []string{filepath.Join(home, ".ssh"), ah, ws, filepath.Join(home, ".cache", "go-build")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".netrc"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	cfg := Config{Workspace: ws, AvfsHome: ah, RunDir: run, UserHome: home,
		Writable: Resolve([]string{"$GOCACHE", "~/.missing"}, home, ws, getenv),
		ReadOnly: Resolve([]string{".git"}, home, ws, getenv)}
	p, err := New(On, cfg, "/usr/bin/bwrap", nil)
	if err != nil {
		t.Fatal(err)
	}
	iso := p.Isolation
	for _, h := range []string{ah, run, filepath.Join(home, ".ssh"), filepath.Join(home, ".netrc")} {
		if !slices.Contains(iso.Hidden, h) {
			t.Errorf("%s is not hidden: %v", h, iso.Hidden)
		}
	}
	if !slices.Equal(iso.Writable, []string{filepath.Join(home, ".cache", "go-build")}) || iso.Network != NetworkNone {
		t.Errorf("writable %v, network %s", iso.Writable, iso.Network)
	}
	argv := strings.Join(p.Wrap([]string{"true"}, ws, 3), " ")
	for _, want := range []string{"--unshare-user", "--unshare-pid", "--unshare-net", "--cap-drop ALL", "--new-session",
		"--ro-bind / /", "--tmpfs /tmp", "--ro-bind /dev/null " + filepath.Join(home, ".netrc")} {
		if !strings.Contains(argv, want) {
			t.Errorf("no %q in %s", want, argv)
		}
	}
	// The runtime dir is covered, the workspace bound into it, and only
	// then is the cover made read-only.
	cover, bind, ro := strings.Index(argv, "--tmpfs "+run), strings.Index(argv, "--bind "+ws+" "+ws), strings.Index(argv, "--remount-ro "+run)
	if cover < 0 || bind < cover || ro < bind {
		t.Errorf("runtime dir %d, workspace %d, read-only %d: %s", cover, bind, ro, argv)
	}
	// A writable dir under /tmp (the test's home is) is bound over the
	// private /tmp, not covered by it.
	gc := filepath.Join(home, ".cache", "go-build")
	if tmp, w := strings.Index(argv, "--tmpfs /tmp "), strings.Index(argv, "--bind "+gc+" "+gc); tmp < 0 || w < tmp {
		t.Errorf("/tmp at %d, the writable cache at %d: %s", tmp, w, argv)
	}
	cfg.Network = true
	if p, _ := New(On, cfg, "/usr/bin/bwrap", nil); strings.Contains(strings.Join(p.Wrap(nil, ws, 3), " "), "--unshare-net") || p.Isolation.Network != NetworkHost {
		t.Errorf("a granted network is unshared")
	}
}

func TestResolve(t *testing.T) {
	env := map[string]string{"GOMODCACHE": "/m", "XDG_CACHE_HOME": "/x"}
	got := Resolve([]string{"$GOCACHE", "$GOMODCACHE", "$NPM_CACHE", "~/a", "/b/../c", "rel"}, "/h", "/w", func(k string) string { return env[k] })
	want := []string{"/x/go-build", "/m", "/h/.npm", "/h/a", "/c", "/w/rel"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
