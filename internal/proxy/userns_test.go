package proxy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// needUserOverlay skips unless uid 65534 can mount an overlay in a user
// namespace of its own here (what the transport's probe asks).
func needUserOverlay(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (it runs avfs as uid 65534)")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		t.Skip("user namespaces are off")
	}
}

// treeOf is the vault's tree as "path type mode [content or target]"
// lines, read through the CLI.
func treeOf(t *testing.T, u *user) []string {
	t.Helper()
	var doc struct{ Root node }
	if err := json.Unmarshal([]byte(u.mustAvfs("--json", "tree", "/")), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(dir string, n node)
	walk = func(dir string, n node) {
		for _, c := range n.Children {
			p := dir + "/" + c.Name
			line := p + " " + c.Type + " " + c.Mode
			switch c.Type {
			case "file":
				line += " " + strings.TrimSpace(u.mustAvfs("cat", p))
			case "symlink":
				line += " " + c.Target
			}
			out = append(out, line)
			walk(p, c)
		}
	}
	walk("", doc.Root)
	slices.Sort(out)
	return out
}

type node struct {
	Name, Type, Mode, Target string
	Children                 []node
}

// TestUserNamespaceOverlay: a user other than root gets overlay from
// auto, mounted in its isolated run's own user namespace; the command
// sees its real uid; creates, edits, deletions (whiteouts), a dir
// replaced (opaque), renames, symlinks, modes closed to their owner and
// read-only dirs come back into the vault; a second run stands on the
// first's upper; --cwd is checked inside the mount; --isolate off takes
// FUSE and says why; nothing stays mounted.
func TestUserNamespaceOverlay(t *testing.T) {
	needUserOverlay(t)
	u := newUser(t, nobody)
	first, code, out := u.exec("--shell", "id -u; pwd; mkdir -p src/deep d && echo one > src/a && echo two > b && echo x > d/x && "+
		"ln -s b lnk && ln b hard && echo gone > gone && mkdir ro && echo r > ro/f && chmod 555 ro && "+
		"echo secret > closed && chmod 000 closed && echo p > src/deep/p")
	if first == nil || code != 0 {
		t.Fatalf("first run: exit %d %s", code, out)
	}
	r := first.Result
	if r.Transport == nil || *r.Transport != "overlay" || r.TransportReason == nil || !strings.Contains(*r.TransportReason, "user namespace") {
		t.Fatalf("auto as uid %d: transport %v (%v), want overlay in a user namespace: %s", nobody, r.Transport, r.TransportReason, out)
	}
	if r.Stdout != "65534\n"+*r.Mountpoint+"\n" {
		t.Errorf("the command saw uid and dir %q, want its real uid and the workspace", r.Stdout)
	}
	if r.Overlay == nil || !r.Overlay.Materialized || !r.Overlay.Reused {
		t.Errorf("first run's overlay record: %+v", r.Overlay)
	}
	second, code, out := u.exec("--shell", "cat src/a closed 2>&1; echo three >> b; rm gone; rm -rf d && mkdir d && echo y > d/y; "+
		"mv src/a src/a2; mv src/deep src/moved; rm lnk && ln -s src/a2 lnk; ln -s nowhere dangling")
	if second == nil || code != 0 {
		t.Fatalf("second run: exit %d %s", code, out)
	}
	r = second.Result
	if r.Overlay == nil || r.Overlay.Materialized || r.Overlay.Lowers != 2 {
		t.Errorf("second run did not stand on the first's upper: %+v", r.Overlay)
	}
	if !strings.HasPrefix(r.Stdout, "one\n") || !strings.Contains(r.Stdout, "Permission denied") {
		t.Errorf("second run read %q: want the first's file, and a 0000 file closed to its owner", r.Stdout)
	}
	want := []string{
		"/b file 0644 two\nthree", "/closed file 0000 secret", "/d dir 0755", "/d/y file 0644 y",
		"/dangling symlink 0777 nowhere", "/hard file 0644 two", "/lnk symlink 0777 src/a2",
		"/ro dir 0555", "/ro/f file 0644 r", "/src dir 0755", "/src/a2 file 0644 one",
		"/src/moved dir 0755", "/src/moved/p file 0644 p",
	}
	slices.Sort(want)
	if got := treeOf(t, u); !slices.Equal(got, want) {
		t.Errorf("the vault after two runs:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	u.mustAvfs("fsck")
	// The summary pairs the file's move.
	kinds := map[string]string{}
	for _, c := range r.Changes {
		kinds[c.Path] = c.Kind
	}
	if kinds["/gone"] != "deleted" || kinds["/d/x"] != "deleted" || kinds["/b"] != "modified" {
		t.Errorf("second run's changes: %v", kinds)
	}

	// --cwd is judged inside the mount, where the helper sees it.
	env, code, out := u.exec("--cwd", "src/moved", "--", "pwd")
	if env == nil || code != 0 || env.Result.Stdout != filepath.Join(*env.Result.Mountpoint, "src/moved")+"\n" {
		t.Errorf("--cwd src/moved: exit %d %s", code, out)
	}
	if _, code, out = u.exec("--cwd", "no/such", "--", "pwd"); code != 3 || !strings.Contains(out, `"NotFound"`) || !strings.Contains(out, "--cwd") {
		t.Errorf("--cwd no/such: exit %d %s", code, out)
	}

	// A run the quota refuses leaves neither its writes nor its upper
	// dir, though a dir in it is read-only to its owner.
	u.mustAvfs("quota", "set", "max_size_mb", "1")
	if _, code, out = u.exec("--shell", "mkdir -p q/ro && echo a > q/ro/f && chmod 555 q/ro && head -c 2000000 /dev/zero > big"); code != 7 || !strings.Contains(out, `"QuotaExceeded"`) {
		t.Errorf("a run over the quota: exit %d %s", code, out)
	}
	if code, _, _ := u.avfs("stat", "/q"); code == 0 {
		t.Errorf("a refused run left /q in the vault")
	}
	if left, _ := filepath.Glob(filepath.Join(u.runDir, "layers", ".[rt]*-*")); len(left) != 0 {
		t.Errorf("a refused run left %v in the layer cache", left)
	}
	u.mustAvfs("quota", "set", "max_size_mb", "0")

	// --isolate off runs a plain process of the host: FUSE.
	env, code, out = u.exec("--isolate", "off", "--", "true")
	if env == nil || code != 0 || *env.Result.Transport != "fuse" || !strings.Contains(*env.Result.TransportReason, "--isolate off") {
		t.Errorf("--isolate off as uid %d: exit %d %s", nobody, code, out)
	}
	if m := overlayMounts(u.runDir); len(m) != 0 {
		t.Errorf("overlay mounts on the host after the runs: %v", m)
	}
}

// overlayMounts lists the host's overlay mounts under dir.
func overlayMounts(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mounts")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[2] == "overlay" && dir != "" && strings.HasPrefix(f[1], dir+"/") {
			out = append(out, f[1])
		}
	}
	return out
}

// TestUserNamespaceOverlayMerge: another user's runs past the layer
// cache's depth (32 deltas) have their deltas merged over the base by
// hard links, as root's are, though the user may not chown: the 34th
// run stands on a merged delta over the base, and what it sees equals
// the vault's tree.
func TestUserNamespaceOverlayMerge(t *testing.T) {
	needUserOverlay(t)
	t.Parallel()
	u := newUser(t, nobody)
	src := filepath.Join(u.root, "src")
	for i := range 200 {
		u.write(filepath.Join(src, "b", strconv.Itoa(i)), strconv.Itoa(i)+"\n", 0o644)
	}
	u.mustAvfs("import", src, "/")
	var last *proxy.Envelope
	for i := 1; i <= 34; i++ {
		env, code, out := u.exec("--checkpoint", "never", "--shell", fmt.Sprintf(
			"mkdir -p d%d && echo %d > d%d/f%d && rm -f d%d/f%d && echo x >> b/%d && rm -f b/%d",
			i%5, i, i%5, i, (i+2)%5, i-3, i, i+100))
		if env == nil || code != 0 {
			t.Fatalf("run %d: exit %d %s", i, code, out)
		}
		last = env
	}
	if o := last.Result.Overlay; o == nil || !o.Materialized || o.Lowers != 2 {
		t.Fatalf("the 34th run: %+v, want a merged delta over the base (2 lowers, materialized)", o)
	}
	// What a run sees through the merged stack is the vault's tree.
	env, code, out := u.exec("--checkpoint", "never", "--shell",
		`find . -path ./.avfs -prune -o -type f -print | while read f; do echo "$f" $(cat "$f"); done`)
	if env == nil || code != 0 {
		t.Fatalf("the reading run: exit %d %s", code, out)
	}
	var want []string
	for _, l := range treeOf(t, u) {
		if f := strings.Fields(l); len(f) >= 3 && f[1] == "file" {
			want = append(want, "."+f[0]+" "+strings.Join(strings.Fields(strings.Join(f[3:], " ")), " "))
		}
	}
	slices.Sort(want)
	got := strings.Split(strings.TrimSpace(env.Result.Stdout), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("through the merged stack:\n%s\nthe vault:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	u.mustAvfs("fsck")
}
