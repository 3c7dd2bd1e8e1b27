package proxy_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// listener counts the TCP connections the host sees on a port of all its
// addresses.
func listener(t *testing.T) (port int, seen *atomic.Int64) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			seen.Add(1)
			_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, seen
}

func forUsers(t *testing.T, fn func(t *testing.T, u *user)) {
	for _, c := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", nobody}} {
		t.Run(c.name, func(t *testing.T) { fn(t, newUser(t, c.uid)) })
	}
}

// TestIsolationFallback: where bubblewrap is missing or the kernel
// refuses its namespaces, auto runs the command without them and says
// why; on refuses with IsolationUnavailable and touches nothing.
func TestIsolationFallback(t *testing.T) {
	forUsers(t, func(t *testing.T, u *user) {
		// A bubblewrap that fails as the kernel does in some containers.
		fake := filepath.Join(u.root, "bwrap-refused")
		u.write(fake, "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n", 0o755)
		for _, bwrap := range []string{filepath.Join(u.root, "no-such-bwrap"), fake} {
			u.extra = []string{"AVFS_BWRAP=" + bwrap}
			env, code, out := u.exec("--", "sh", "-c", "echo ran")
			if env == nil || code != 0 || env.Result.Stdout != "ran\n" {
				t.Fatalf("auto without isolation: exit %d %s", code, out)
			}
			iso := env.Result.Isolation
			if iso == nil || iso.Mode != "none" || iso.Network != "host" || iso.Requested != "auto" ||
				!strings.Contains(iso.Reason, "isolation unavailable") {
				t.Fatalf("auto without isolation says %+v", iso)
			}
			before := u.mustAvfs("checkpoint", "list", "--json")
			code, out, errOut := u.avfs("proxy", "exec", "--json", "--isolate", "on", "--", "sh", "-c", "echo ran > f")
			if code != 17 || !strings.Contains(out, `"IsolationUnavailable"`) {
				t.Fatalf("--isolate on without isolation: exit %d %s%s", code, out, errOut)
			}
			if after := u.mustAvfs("checkpoint", "list", "--json"); after != before {
				t.Errorf("a refused run saved a checkpoint:\n%s\n%s", before, after)
			}
			if m := fuseMounts(); slices.ContainsFunc(m, func(s string) bool { return u.runDir != "" && strings.HasPrefix(s, u.runDir) }) {
				t.Errorf("a refused run left a mount: %v", m)
			}
			if code, out, _ := u.avfs("cat", "/f"); code == 0 {
				t.Errorf("a refused run wrote f: %s", out)
			}
			// policy check shows the same before anything runs.
			code, out, _ = u.avfs("policy", "check", "--json", "--", "true")
			if code != 0 || !strings.Contains(out, `"mode": "none"`) || !strings.Contains(out, "isolation unavailable") {
				t.Errorf("policy check without isolation: %s", out)
			}
		}
		u.extra = nil
		env, code, out := u.exec("--", "true")
		if env == nil || code != 0 || env.Result.Isolation.Mode != "namespaces" {
			t.Fatalf("with bubblewrap back: exit %d %s", code, out)
		}
	})
}

// TestIsolationNetworkByDecision: an isolated run has no network unless
// its decision grants it: an approved require_approval request, or a
// rule with network = "host". What the classifier allows without a grant
// stays off the network, whatever it runs.
func TestIsolationNetworkByDecision(t *testing.T) {
	forUsers(t, func(t *testing.T, u *user) {
		port, seen := listener(t)
		url := fmt.Sprintf("http://127.0.0.1:%d/", port)
		sock := fmt.Sprintf(`python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), 3)'`, port)
		// Allowed by the classifier (python is unknown: allow with a
		// checkpoint), never granted the network.
		env, _, out := u.exec("--isolate", "on", "--shell", sock)
		if env == nil || env.Result.ExitCode == nil || *env.Result.ExitCode == 0 || seen.Load() != 0 || env.Result.Isolation.Network != "none" {
			t.Fatalf("an unapproved socket reached the host (%d connections): %s", seen.Load(), out)
		}
		// curl needs approval; the approved run gets the host's network.
		env, code, out := u.exec("--isolate", "on", "--", "curl", "-s", "-m", "5", url)
		if env == nil || code != 15 || env.Result.State != proxy.StateAwaitingApproval || seen.Load() != 0 {
			t.Fatalf("curl before approval: exit %d %s", code, out)
		}
		code, out, errOut := u.avfs("policy", "check", "--json", "--", "curl", "-s", "-m", "5", url)
		if code != 0 || !strings.Contains(out, `"network": "none"`) {
			t.Errorf("policy check of an unapproved curl: %s%s", out, errOut)
		}
		u.mustAvfs("proxy", "approve", env.ID)
		// The approval holds for the boundary it was asked with, or a
		// stricter one: not without isolation.
		code, out, _ = u.avfs("proxy", "exec", "--json", "--isolate", "off", "--approval", env.ID)
		if code != 15 || !strings.Contains(out, `"ApprovalMismatch"`) || seen.Load() != 0 {
			t.Fatalf("approved curl run with --isolate off: exit %d %s", code, out)
		}
		env, code, out = u.exec("--approval", env.ID, "--", "curl", "-s", "-m", "5", url)
		if env == nil || code != 0 || env.Result.Stdout != "ok" || seen.Load() != 1 {
			t.Fatalf("approved curl: exit %d, %d connections: %s", code, seen.Load(), out)
		}
		if iso := env.Result.Isolation; iso.Requested != "on" || iso.Mode != "namespaces" || iso.Network != "host" || !strings.Contains(iso.Reason, "approved") {
			t.Errorf("approved run's isolation: %+v", iso)
		}
		// A rule that grants the network.
		u.write(filepath.Join(u.ah, "policy.toml"), `version = 1
[[rule]]
name = "fetch"
program = ["curl"]
action = "allow"
network = "host"
`, 0o600)
		env, code, out = u.exec("--isolate", "on", "--", "curl", "-s", "-m", "5", url)
		if env == nil || code != 0 || seen.Load() != 2 || env.Result.Isolation.Network != "host" {
			t.Fatalf("curl under a network rule: exit %d, %d connections: %s", code, seen.Load(), out)
		}
		// The same rule does not carry a script's other commands.
		env, _, out = u.exec("--isolate", "on", "--shell", "curl -s -m 5 "+url+"; "+sock)
		if env == nil || seen.Load() != 2 || env.Result.Isolation.Network != "none" {
			t.Fatalf("a granted curl beside an ungranted python: %d connections: %s", seen.Load(), out)
		}
	})
}

// TestIsolationProcesses: the command is alone in its PID namespace:
// kill -9 -1 ends only the run, and a timeout still gives the grace
// period to a command that ignores SIGTERM.
func TestIsolationProcesses(t *testing.T) {
	forUsers(t, func(t *testing.T, u *user) {
		canary := u.command("sleep", "1000")
		if err := canary.Start(); err != nil {
			t.Fatal(err)
		}
		defer canary.Process.Kill()
		done := make(chan struct{})
		go func() { _ = canary.Wait(); close(done) }()
		env, _, out := u.exec("--isolate", "on", "--", "kill", "-9", "-1")
		if env == nil {
			t.Fatalf("kill -9 -1: %s", out)
		}
		select {
		case <-done:
			t.Fatal("kill -9 -1 inside the run killed a process of the user outside it")
		case <-time.After(100 * time.Millisecond):
		}
		env, _, out = u.exec("--isolate", "on", "--", "python3", "-c", `import os; print(sum(p.isdigit() for p in os.listdir("/proc")))`)
		if env == nil || strings.TrimSpace(env.Result.Stdout) == "" {
			t.Fatalf("ls /proc: %s", out)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(env.Result.Stdout)); n > 5 {
			t.Errorf("the run sees %d processes", n)
		}
		env, code, out := u.exec("--isolate", "on", "--timeout", "300ms", "--grace", "300ms",
			"--shell", "trap 'echo term' TERM; sleep 5 & wait; echo after")
		if env == nil || code != 124 || !env.Result.TimedOut || env.Result.Stdout != "term\nafter\n" {
			t.Fatalf("SIGTERM on timeout: exit %d %s", code, out)
		}
	})
}

// workload is one piece of real work, and the check of its output.
type workload struct {
	name, script string
	check        string // in stdout
}

// TestIsolationRealWork: git, go build and go test with the default Go
// caches, npm, python and sqlite3 work through proxy exec with
// isolation on, as root and as an unprivileged user; each is timed with
// isolation on and off (logged, not asserted: a benchmark is never a
// timed test).
func TestIsolationRealWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go code and runs npm")
	}
	works := []workload{
		{"git", `git init -q r && cd r && git config user.email a@b && git config user.name a &&
echo one > f && git add f && git commit -qm one && git checkout -qb topic && echo two > f && git commit -qam two &&
git checkout -q master 2>/dev/null || git checkout -q main; cat f; git log --oneline --all | wc -l`, "one\n2"},
		{"go", `mkdir -p m && cd m && printf 'module m\n\ngo 1.21\n' > go.mod &&
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println(Add(2, 3)) }\n\nfunc Add(a, b int) int { return a + b }\n' > main.go &&
printf 'package main\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) { if Add(2, 3) != 5 { t.Fatal() } }\n' > main_test.go &&
go build -o m . && ./m && go test -count=1 . | cut -f1`, "5\nok"},
		{"npm", `mkdir -p dep app && (cd dep && printf '{"name":"dep","version":"1.0.0","main":"i.js"}' > package.json &&
echo 'module.exports = 42' > i.js && npm pack -q >/dev/null) && printf '{"name":"app","version":"1.0.0"}' > app/package.json &&
npm install --prefix app --offline --no-audit --no-fund -q ./dep/dep-1.0.0.tgz >/dev/null && cd app && node -e 'console.log(require("dep"))'`, "42"},
		{"python", `python3 -c 'import os
os.makedirs("py", exist_ok=True)
for i in range(200):
    open("py/%d.txt" % i, "w").write("x" * i)
print(len(os.listdir("py")))'`, "200"},
		{"sqlite3", `sqlite3 db.sqlite 'create table t(x); insert into t values (1), (2), (3); select sum(x) from t;'`, "6"},
	}
	forUsers(t, func(t *testing.T, u *user) {
		if u.uid == 0 {
			// Root keeps its own home, and so its warm Go caches.
			u.home = "/root"
		}
		// npm install needs approval (it may reach a registry); offline,
		// the policy may allow it: isolated, it has no network anyway.
		u.write(filepath.Join(u.ah, "policy.toml"), `version = 1
[[rule]]
name = "npm-offline"
program = ["npm"]
args = ["--offline"]
action = "allow_with_checkpoint"
`, 0o600)
		for _, w := range works {
			var took = map[string][]float64{}
			for rep := 0; rep < 4; rep++ {
				for _, iso := range []string{"on", "off"} {
					dir := fmt.Sprintf("%s-%s-%d", w.name, iso, rep)
					env, code, out := u.exec("--isolate", iso, "--linger", "1m", "--timeout", "5m", "--shell", "mkdir "+dir+" && cd "+dir+" && "+w.script)
					if env == nil || code != 0 || !strings.Contains(env.Result.Stdout, w.check) {
						t.Fatalf("%s with --isolate %s: exit %d %s", w.name, iso, code, out)
					}
					if want := map[string]string{"on": "namespaces", "off": "none"}[iso]; env.Result.Isolation.Mode != want {
						t.Fatalf("%s ran with isolation %+v", w.name, env.Result.Isolation)
					}
					if rep > 0 { // the first run warms the caches
						took[iso] = append(took[iso], env.Result.StageMs[proxy.StateExecute])
					}
				}
			}
			on, off := medianOf(took["on"]), medianOf(took["off"])
			t.Logf("%-8s execute stage, median of 3 warm runs: isolated %.1f ms, not isolated %.1f ms (%+.0f%%)", w.name, on, off, 100*(on-off)/off)
		}
	})
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// TestRuntimeDir: mountpoints are outside the home, per home, in a 0700
// directory of the user that a symlink, another user's directory or
// loose modes cannot replace.
func TestRuntimeDir(t *testing.T) {
	xdg, homeA, homeB := t.TempDir(), t.TempDir(), t.TempDir()
	a, err := proxy.RuntimeDir(homeA, xdg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proxy.RuntimeDir(homeB, xdg)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Dir(a) != filepath.Join(xdg, "avfs") {
		t.Fatalf("runtime dirs %s and %s", a, b)
	}
	for _, d := range []string{a, filepath.Dir(a)} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	// Loose modes are refused, and nothing is changed.
	if err := os.Chmod(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.RuntimeDir(homeA, xdg); err == nil || !strings.Contains(err.Error(), "not 0700") {
		t.Errorf("a 0755 runtime dir: %v", err)
	}
	if fi, _ := os.Stat(a); fi.Mode().Perm() != 0o755 {
		t.Errorf("the refused dir was changed")
	}
	// A symlink in its place is refused.
	x2 := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(x2, "avfs")); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.RuntimeDir(homeA, x2); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked runtime dir: %v", err)
	}
	// Another user's is refused (as root: chown it away).
	if os.Geteuid() == 0 {
		x3 := t.TempDir()
		if err := os.Mkdir(filepath.Join(x3, "avfs"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(x3, "avfs"), nobody, nobody); err != nil {
			t.Fatal(err)
		}
		if _, err := proxy.RuntimeDir(homeA, x3); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("another user's runtime dir: %v", err)
		}
		// An XDG_RUNTIME_DIR that is not the user's is not used at all.
		if err := os.Chown(x3, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		if d, err := proxy.RuntimeDir(homeA, x3); err != nil || !strings.HasPrefix(d, "/run/avfs-0/") {
			t.Errorf("with another user's XDG_RUNTIME_DIR: %s %v", d, err)
		}
	}
}

// TestMountpointOutsideHome: a run's workspace is not under $AVFS_HOME,
// and .. from it does not lead there.
func TestMountpointOutsideHome(t *testing.T) {
	u := newUser(t, 0)
	env, code, out := u.exec("--isolate", "off", "--", "python3", "-c", `import os; os.chdir("../../.."); print(os.getcwd(), os.listdir("."))`)
	if env == nil || code != 0 {
		t.Fatalf("exit %d %s", code, out)
	}
	mnt := *env.Result.Mountpoint
	if strings.HasPrefix(mnt, u.ah) || strings.HasPrefix(mnt, u.root) {
		t.Fatalf("the mountpoint %s is under the home", mnt)
	}
	if strings.Contains(env.Result.Stdout, "vaults") || strings.Contains(env.Result.Stdout, "policy") {
		t.Errorf(".. from the workspace reaches the home: %s", env.Result.Stdout)
	}
}

// TestIsolateFlagInvalid: an --isolate that is not auto, on or off is
// InvalidInput, and the run is neither recorded nor started.
func TestIsolateFlagInvalid(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.avfs("", "--json", "proxy", "exec", "--isolate", "maybe", "--", "touch", "f")
	if code != 5 || !strings.Contains(out, `"InvalidInput"`) || !strings.Contains(out, "auto, on or off") {
		t.Fatalf("--isolate maybe: exit %d %s", code, out)
	}
	if _, out, _ := e.avfs("", "--json", "proxy", "history"); strings.Contains(out, `"id"`) {
		t.Errorf("the invalid run was recorded: %s", out)
	}
	if cps := e.checkpoints(); len(cps) != 0 {
		t.Errorf("the invalid run saved checkpoints %v", cps)
	}
}

// TestRuntimeDirPrune: the runtime dir of a home that is gone is removed
// when a new home's is made (once past the grace for homes not made
// yet), unless something is still in its mounts.
func TestRuntimeDirPrune(t *testing.T) {
	xdg := t.TempDir()
	gone, kept, busy := t.TempDir(), t.TempDir(), t.TempDir()
	dirs := map[string]string{}
	for _, h := range []string{gone, kept, busy} {
		d, err := proxy.RuntimeDir(h, xdg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(d, "mnt", "v"), 0o700); err != nil {
			t.Fatal(err)
		}
		dirs[h] = d
	}
	// Something still in busy's mountpoint (what a live mount looks like
	// to rmdir: not removable).
	if err := os.WriteFile(filepath.Join(dirs[busy], "mnt", "v", "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(gone)
	os.RemoveAll(busy)
	age(t, dirs[gone]) // past prune's grace for homes not made yet
	age(t, dirs[busy])
	if _, err := proxy.RuntimeDir(t.TempDir(), xdg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dirs[gone]); !os.IsNotExist(err) {
		t.Errorf("the runtime dir of a deleted home stays: %v", err)
	}
	if _, err := os.Stat(dirs[kept]); err != nil {
		t.Errorf("the runtime dir of a live home went: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirs[busy], "mnt", "v", "file")); err != nil {
		t.Errorf("a runtime dir with something in its mount was emptied: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dirs[busy], "home")); err != nil || string(b) != busy {
		t.Errorf("a runtime dir kept no longer says whose it is: %q %v", b, err)
	}
	// Nor does it look new again: its age is what the grace goes by.
	if fi, err := os.Stat(filepath.Join(dirs[busy], "home")); err != nil || time.Since(fi.ModTime()) < 30*time.Minute {
		t.Errorf("the prune of a runtime dir it kept made its home file new: %v", err)
	}
}
