package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

var updateEscapes = flag.Bool("update-escapes", false, "rewrite testdata/escapes-off.txt with the lines that get through with isolation off")

// escapeLine is one line of testdata/escapes.txt.
type escapeLine struct {
	n              int
	harmful        bool // not run without isolation
	target, what   string
	script, source string // source: "what | script", as escapes-off.txt lists it
}

func readEscapes(t *testing.T) []escapeLine {
	t.Helper()
	b, err := os.ReadFile("testdata/escapes.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []escapeLine
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.SplitN(l, " | ", 3)
		if len(f) != 3 {
			t.Fatalf("escapes.txt:%d: want TARGET | WHAT | SCRIPT", i+1)
		}
		e := escapeLine{n: i + 1, target: f[0], what: f[1], script: f[2]}
		if strings.HasPrefix(e.target, "!") {
			e.harmful, e.target = true, e.target[1:]
		}
		e.source = e.target + " | " + e.what + " | " + e.script
		out = append(out, e)
	}
	return out
}

// canaries are what a line must not reach: listeners on the host, files
// outside the workspace, avfs's home, a process.
type canaries struct {
	u                  *user
	tcp, udp, abs      atomic.Int64
	port, uport        int
	hostIP, absName    string
	secretTok, homeTok string
	envTok, shadow     string
	hostDir            string
	policy             string
	pend               string
	canary             *exec.Cmd
	canaryDone         chan struct{}
	homeSnap           string
	closers            []func()
	allowAll           string
}

func token() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newCanaries(t *testing.T, u *user, allowAll bool) *canaries {
	c := &canaries{u: u, secretTok: "secret-" + token(), homeTok: "home-" + token(), envTok: "env-" + token(),
		absName: "avfs-escape-" + token(), hostDir: filepath.Join(u.root, "host")}
	if allowAll {
		c.allowAll = "allow"
	}
	t.Cleanup(c.close)
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	c.closers = append(c.closers, func() { ln.Close() })
	c.port = ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.tcp.Add(1)
			_, _ = conn.Write([]byte("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			conn.Close()
		}
	}()
	pc, err := net.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	c.closers = append(c.closers, func() { pc.Close() })
	c.uport = pc.LocalAddr().(*net.UDPAddr).Port
	go func() {
		b := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
			c.udp.Add(1)
		}
	}()
	al, err := net.Listen("unix", "@"+c.absName)
	if err != nil {
		t.Fatal(err)
	}
	c.closers = append(c.closers, func() { al.Close() })
	go func() {
		for {
			conn, err := al.Accept()
			if err != nil {
				return
			}
			c.abs.Add(1)
			conn.Close()
		}
	}()
	c.hostIP = "127.0.0.1"
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
				c.hostIP = ip.IP.String()
				break
			}
		}
	}
	if b, err := os.ReadFile("/etc/shadow"); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		if f := strings.SplitN(first, ":", 4); len(f) == 4 {
			c.shadow = strings.Join(f[:3], ":")
		}
	}
	c.secrets()
	c.resetHome(t)
	c.resetHost()
	c.startCanary(t)
	return c
}

func (c *canaries) close() {
	for _, f := range c.closers {
		f()
	}
	c.stopCanary()
}

// secrets writes the fake secrets of the user's home, each holding the
// secret token.
func (c *canaries) secrets() {
	u := c.u
	for _, p := range []string{".ssh/id_rsa", ".aws/credentials", ".azure/azureProfile.json", ".config/gcloud/credentials.db",
		".kube/config", ".docker/config.json", ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".gnupg/secring.gpg"} {
		u.write(filepath.Join(u.home, p), "SECRET-CANARY "+c.secretTok+"\n", 0o600)
	}
	c.homeSnap = snapshot(u.home)
}

// policyText is the home's policy: with allowAll, every category the
// policy may allow is allowed, so that the kernel alone holds the line.
func (c *canaries) policyText() string {
	s := "version = 1\n# avfs-escape canary\n"
	if c.allowAll != "" {
		s += "[categories]\n"
		for _, cat := range []string{"host_escape_risk", "networked", "destructive", "mutating", "interactive", "unknown", "read_only"} {
			s += cat + " = \"allow\"\n"
		}
	}
	return s + "[[rule]]\nname = \"pending\"\nprogram = [\"avfs-pending-marker\"]\naction = \"require_approval\"\n"
}

// resetHome makes $AVFS_HOME as the lines find it: the vault, the canary
// file, the policy and a run awaiting approval.
func (c *canaries) resetHome(t *testing.T) {
	u := c.u
	if _, err := os.Stat(filepath.Join(u.ah, "vaults", "v.avfs")); err != nil {
		u.unmountAll()
		_ = os.RemoveAll(u.ah)
		u.mustAvfs("vault", "create", "v", "--use")
	}
	if code, _, _ := u.avfs("vault", "use", "v"); code != 0 {
		t.Fatalf("vault use v failed")
	}
	c.policy = c.policyText()
	u.write(filepath.Join(u.ah, "policy.toml"), c.policy, 0o600)
	u.write(filepath.Join(u.ah, "canary.txt"), "HOME-CANARY "+c.homeTok+"\n", 0o600)
	env, code, out := u.exec("--", "avfs-pending-marker")
	if env == nil || env.Result.State != proxy.StateAwaitingApproval {
		t.Fatalf("pending request: exit %d %s", code, out)
	}
	c.pend = env.ID
}

func (c *canaries) resetHost() {
	_ = os.RemoveAll(c.hostDir)
	c.u.mkdir(c.hostDir)
	c.u.write(filepath.Join(c.hostDir, "keep.txt"), "keep\n", 0o644)
}

func (c *canaries) startCanary(t *testing.T) {
	cmd := c.u.command("bash", "-c", "sleep 1000000; :", "avfs-escape-canary")
	cmd.Env = append(cmd.Env, "AVFS_CANARY="+c.envTok)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.canary, c.canaryDone = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(c.canaryDone)
}

func (c *canaries) stopCanary() {
	if c.canary != nil {
		_ = syscall.Kill(-c.canary.Process.Pid, syscall.SIGKILL)
		<-c.canaryDone
		c.canary = nil
	}
}

// canaryHurt says how the canary process was reached, or "".
func (c *canaries) canaryHurt() string {
	select {
	case <-c.canaryDone:
		return "killed the canary process"
	default:
	}
	pid := c.canary.Process.Pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && (b[i+2] == 'T' || b[i+2] == 't') {
			return "stopped the canary process"
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "TracerPid:" && f[1] != "0" {
				return "traced the canary process"
			}
		}
	}
	// A line that killed the canary's sleep leaves bash to exit at once.
	time.Sleep(5 * time.Millisecond)
	select {
	case <-c.canaryDone:
		return "killed the canary process"
	default:
	}
	return ""
}

// snapshot lists a tree's names and sizes, without the caches a run may
// write (the default writable dirs).
func snapshot(dir string) string {
	var b strings.Builder
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() && (rel == ".avfs" || rel == ".cache" || rel == "go" || rel == ".npm") {
			return filepath.SkipDir
		}
		fmt.Fprintf(&b, "%s %d %v\n", rel, fi.Size(), fi.Mode())
		return nil
	})
	return b.String()
}

// expand replaces a line's placeholders.
func (c *canaries) expand(script string) string {
	r := strings.NewReplacer("@PORT@", strconv.Itoa(c.port), "@UPORT@", strconv.Itoa(c.uport), "@HOSTIP@", c.hostIP,
		"@HOME@", c.u.home, "@AH@", c.u.ah, "@RUNDIR@", c.u.runDir, "@HOSTDIR@", c.hostDir,
		"@CPID@", strconv.Itoa(c.canary.Process.Pid), "@ABS@", c.absName, "@AVFS@", c.u.bin, "@PEND@", c.pend)
	return r.Replace(script)
}

// workspace greps the workspace for the tokens and empties it, as the
// user (a mount of another user is closed to root).
func (c *canaries) workspace(mnt string) string {
	if !isMounted(mnt) {
		return c.vaultWorkspace()
	}
	args := []string{"-c", `grep -rlsF -e "$1" -e "$2" -e "$3" ${4:+-e "$4"} "$5"; find "$5" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null; true`,
		"sh", c.secretTok, c.homeTok, c.envTok, c.shadow, mnt}
	out, _ := c.u.command("sh", args...).Output()
	return strings.TrimSpace(string(out))
}

// vaultWorkspace is workspace for a run whose workspace is gone (an
// overlay run ends with its ingest): the vault is exported and grepped,
// then emptied.
func (c *canaries) vaultWorkspace() string {
	dir, err := os.MkdirTemp(c.u.root, "export-")
	if err != nil {
		return ""
	}
	defer os.RemoveAll(dir)
	c.u.chown(dir)
	if code, _, _ := c.u.avfs("export", "/", dir); code != 0 {
		return ""
	}
	args := []string{"-c", `grep -rlsF -e "$1" -e "$2" -e "$3" ${4:+-e "$4"} "$5"; true`,
		"sh", c.secretTok, c.homeTok, c.envTok, c.shadow, dir}
	out, _ := c.u.command("sh", args...).Output()
	des, _ := os.ReadDir(dir)
	for _, d := range des {
		c.u.avfs("rm", "-r", "-f", "/"+d.Name())
	}
	return strings.ReplaceAll(strings.TrimSpace(string(out)), dir, "")
}

// judge runs one line and returns how it got through (empty: it did
// not), restoring every canary it reached.
func (c *canaries) judge(t *testing.T, e escapeLine, isolate string) (why []string, ran bool) {
	u := c.u
	script := c.expand(e.script)
	tcp, udp, abs := c.tcp.Load(), c.udp.Load(), c.abs.Load()
	mnt := filepath.Join(u.runDir, "mnt", "v")
	wasMounted := isMounted(mnt)
	env, _, out := u.exec("--isolate", isolate, "--linger", "1m", "--timeout", "20s", "--grace", "1s", "--shell", script)
	printed := out
	if env != nil {
		printed = env.Result.Stdout + env.Result.Stderr
		ran = env.Result.ExitCode != nil
		if isolate == "on" && env.Result.Isolation != nil && env.Result.Isolation.Mode != "namespaces" && env.Result.State == proxy.StateCompleted {
			t.Fatalf("line %d ran without namespaces under --isolate on: %+v", e.n, env.Result.Isolation)
		}
	}
	time.Sleep(20 * time.Millisecond) // a connection in flight when the run ended
	if c.tcp.Load() > tcp {
		why = append(why, "TCP connection to the host's listener")
	}
	if c.udp.Load() > udp {
		why = append(why, "UDP datagram to the host's listener")
	}
	if c.abs.Load() > abs {
		why = append(why, "connection to the host's abstract unix socket")
	}
	for _, tk := range []struct{ tok, what string }{{c.secretTok, "a secret of the home"}, {c.homeTok, "$AVFS_HOME/canary.txt"},
		{c.envTok, "another process's environment"}, {c.shadow, "/etc/shadow"}} {
		if tk.tok != "" && strings.Contains(printed, tk.tok) {
			why = append(why, "printed "+tk.what)
		}
	}
	if found := c.workspace(mnt); found != "" {
		why = append(why, "copied a canary into the workspace ("+found+")")
	}
	if wasMounted && !isMounted(mnt) {
		why = append(why, "unmounted its workspace")
	}
	if h := c.canaryHurt(); h != "" {
		why = append(why, h)
		c.stopCanary()
		c.startCanary(t)
	}
	homeHurt := ""
	if b, err := os.ReadFile(filepath.Join(u.ah, "canary.txt")); err != nil || !strings.Contains(string(b), c.homeTok) {
		homeHurt = "changed or deleted $AVFS_HOME/canary.txt"
	} else if b, err := os.ReadFile(filepath.Join(u.ah, "policy.toml")); err != nil || string(b) != c.policy {
		homeHurt = "rewrote the home's policy.toml"
	} else if _, err := os.Stat(filepath.Join(u.ah, "vaults", "v.avfs")); err != nil {
		homeHurt = "deleted the vault"
	} else if rec, err := os.ReadFile(filepath.Join(u.ah, "proxy", "runs", c.pend+".json")); err != nil || !bytes.Contains(rec, []byte(`"status": "pending"`)) {
		homeHurt = "approved or removed the pending request"
	}
	if homeHurt != "" {
		why = append(why, homeHurt)
		c.resetHome(t)
	}
	ents, _ := os.ReadDir(c.hostDir)
	keep, err := os.ReadFile(filepath.Join(c.hostDir, "keep.txt"))
	fi, _ := os.Stat(filepath.Join(c.hostDir, "keep.txt"))
	if len(ents) != 1 || err != nil || string(keep) != "keep\n" || fi == nil || fi.Mode().Perm() != 0o644 {
		why = append(why, "wrote or deleted in a host dir outside the workspace")
		c.resetHost()
	}
	if s := snapshot(u.home); s != c.homeSnap {
		why = append(why, "changed the user's home")
		_ = os.RemoveAll(filepath.Join(u.home, ".bashrc"))
		_ = os.RemoveAll(filepath.Join(u.home, "pwned"))
		c.secrets()
	}
	// The runtime dir's parent is shared by every home of the user: a
	// line that climbs out of its mount lands there.
	if ents, err := os.ReadDir(filepath.Dir(u.runDir)); err == nil {
		for _, e := range ents {
			if !e.IsDir() && e.Name() != "isolation-probe" {
				why = append(why, "wrote in the runtime dir ("+e.Name()+")")
				_ = os.Remove(filepath.Join(filepath.Dir(u.runDir), e.Name()))
			}
		}
	}
	if _, err := os.Stat("/usr/local/bin/pwned"); err == nil {
		why = append(why, "wrote /usr/local/bin")
		_ = os.Remove("/usr/local/bin/pwned")
	}
	return why, ran
}

// decision is the policy's action for a line, without running it.
func (c *canaries) decision(t *testing.T, script string) string {
	code, out, errOut := c.u.avfs("policy", "check", "--json", "--shell", script)
	if code != 0 {
		t.Fatalf("policy check: exit %d %s%s", code, out, errOut)
	}
	var r struct {
		Decision struct{ Action string } `json:"decision"`
	}
	_ = json.Unmarshal([]byte(out), &r)
	return r.Decision.Action
}

// TestEscapes runs every line of testdata/escapes.txt through the real
// avfs: isolated (with a policy that allows everything it may, so the
// kernel alone holds), as root and as an unprivileged user, none may get
// through; with isolation off, what gets through is what the classifier
// misses, and it must be exactly testdata/escapes-off.txt (rewrite it
// with -update-escapes after a classifier change).
func TestEscapes(t *testing.T) {
	lines := readEscapes(t)
	if len(lines) < 150 {
		t.Fatalf("the escape table has %d lines, want at least 150", len(lines))
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bubblewrap is missing (scripts/deps.sh installs it): the isolated rows cannot run")
	}
	// As root, auto runs on overlay; the fuse row keeps FUSE under the
	// same table as root. An unprivileged user's isolated run gets
	// overlay from auto too, mounted in the run's own user namespace.
	for _, tc := range []struct {
		name      string
		uid       int
		isolate   string
		transport string
	}{{"isolated-root", 0, "on", "overlay"}, {"isolated-root-fuse", 0, "on", "fuse"}, {"isolated-nobody", nobody, "on", "auto"},
		{"off-root", 0, "off", "fuse"}} { // escapes-off.txt is measured on fuse
		t.Run(tc.name, func(t *testing.T) {
			u := newUser(t, tc.uid)
			u.args = []string{"--transport", tc.transport}
			c := newCanaries(t, u, tc.isolate == "on")
			// Warm the mount and learn the runtime dir.
			env, code, out := u.exec("--isolate", tc.isolate, "--linger", "1m", "--", "true")
			if env == nil || code != 0 {
				t.Fatalf("first run: exit %d %s", code, out)
			}
			if tc.transport != "fuse" && (env.Result.Transport == nil || *env.Result.Transport != "overlay") {
				t.Fatalf("%s runs on %v, want overlay: %s", tc.name, env.Result.Transport, out)
			}
			if tc.isolate == "on" {
				// The harmful lines (kill -9 -1) run only once the PID
				// namespace is seen to hold.
				env, _, out := u.exec("--isolate", "on", "--linger", "1m", "--shell", c.expand("cat /proc/@CPID@/cmdline; ls /proc"))
				if env == nil || strings.Contains(env.Result.Stdout, "avfs-escape-canary") {
					t.Fatalf("the canary is visible from an isolated run: %s", out)
				}
			}
			// The judge sees what gets through: a token printed, and one
			// written into the workspace, are caught.
			for _, ctl := range []string{"echo " + c.secretTok, "echo " + c.homeTok + " > w.txt"} {
				if why, _ := c.judge(t, escapeLine{script: ctl}, tc.isolate); len(why) != 1 {
					t.Fatalf("control %q: judged %v, want one way through", ctl, why)
				}
			}
			var through []string
			executed := 0
			for _, e := range lines {
				if tc.isolate == "off" && e.harmful {
					if a := c.decision(t, c.expand(e.script)); a == "allow" || a == "allow_with_checkpoint" {
						through = append(through, e.source)
						t.Logf("line %d (%s): not run, the classifier says %s", e.n, e.what, a)
					}
					continue
				}
				why, ran := c.judge(t, e, tc.isolate)
				if ran {
					executed++
				}
				if len(why) == 0 {
					continue
				}
				through = append(through, e.source)
				if tc.isolate == "on" {
					t.Errorf("escapes.txt:%d (%s) got through isolation: %s", e.n, e.what, strings.Join(why, "; "))
				} else {
					t.Logf("line %d (%s): %s", e.n, e.what, strings.Join(why, "; "))
				}
			}
			t.Logf("%d of %d lines got through (%s); %d ran", len(through), len(lines), tc.name, executed)
			// With every category allowed, only what cannot be parsed is
			// refused: the kernel, not the classifier, held the rest.
			if tc.isolate == "on" && executed < len(lines)*3/4 {
				t.Errorf("only %d of %d lines ran: the isolated rows test too little", executed, len(lines))
			}
			if tc.isolate == "off" {
				compareMisses(t, through)
			}
		})
	}
}

// compareMisses checks the lines that got through with isolation off
// against testdata/escapes-off.txt.
func compareMisses(t *testing.T, got []string) {
	const path = "testdata/escapes-off.txt"
	if *updateEscapes || os.Getenv("AVFS_UPDATE_ESCAPES") == "1" {
		head := "# The lines of escapes.txt that get through with --isolate off: what the\n" +
			"# classifier lets run and cannot see into. Written by\n" +
			"#   go test ./internal/proxy -run TestEscapes/off -update-escapes\n"
		if err := os.WriteFile(path, []byte(head+strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update-escapes)", err)
	}
	var want []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("gets through with isolation off, not in %s: %s", path, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("listed in %s, no longer gets through: %s", path, w)
		}
	}
}
