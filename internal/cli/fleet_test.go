package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

var (
	binOnce sync.Once
	binDir  string // removed by TestMain
	binPath string
	binErr  error
)

// avfsBinary builds avfs once per test binary: the fleet tests run it as
// the real processes of several hosts.
func avfsBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "avfs-fleet-bin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "avfs")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/avfs")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// host is one home on a store, standing in for one machine of a fleet.
type host struct {
	t    *testing.T
	bin  string
	home string
	env  []string
	// asUser runs avfs as this uid (0: as the test).
	asUser uint32
}

func newHost(t *testing.T, bin, dsn string, extra ...string) *host {
	home := filepath.Join(t.TempDir(), "home")
	env := append(os.Environ(), "AVFS_HOME="+home, "AVFS_STORE="+dsn, "AVFS_VAULT=", "AVFS_PROXY_LINGER=0")
	h := &host{t: t, bin: bin, home: home, env: append(env, extra...)}
	t.Cleanup(h.unmountAll)
	return h
}

// unmountAll unmounts what the host's runs and mounts left, and fails the
// test if there was any.
func (h *host) unmountAll() {
	code, out, _ := h.run("", "--json", "mounts")
	var r struct {
		Mounts []struct {
			Mountpoint string `json:"mountpoint"`
		} `json:"mounts"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		return
	}
	for _, m := range r.Mounts {
		if _, _, errOut := h.run("", "unmount", "--lazy", m.Mountpoint); errOut != "" {
			h.t.Logf("unmount %s: %s", m.Mountpoint, errOut)
		}
	}
}

func (h *host) run(stdin string, args ...string) (int, string, string) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.env
	if h.asUser != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: h.asUser, Gid: h.asUser}}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func (h *host) ok(args ...string) string {
	h.t.Helper()
	code, out, errOut := h.run("", args...)
	if code != 0 {
		h.t.Fatalf("avfs %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestFleetLeaseTakeover: two homes on one store stand in for two hosts.
// A mount on the first holds the vault's writer lease: the second reads
// beside it but gets VaultLocked naming the mount's pid when it writes.
// The mount's process is killed (SIGKILL: it renews nothing and gives
// nothing back), and the second host writes once the lease expired.
func TestFleetLeaseTakeover(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
	dsn := pgtest.DSN(t)
	bin := avfsBinary(t)
	const ttl = 2 * time.Second
	a := newHost(t, bin, dsn, "AVFS_LEASE_TTL="+ttl.String())
	b := newHost(t, bin, dsn, "AVFS_LEASE_TTL="+ttl.String())
	a.ok("vault", "create", "base")
	a.ok("write", "--vault", "base", "/f", "one")
	mnt := t.TempDir()
	var m struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(a.ok("mount", "base", mnt, "--json")), &m); err != nil || m.PID == 0 {
		t.Fatalf("mount: %v %+v", err, m)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(m.PID, syscall.SIGKILL)
		_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	})
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "one" {
		t.Fatalf("read through the mount: %q %v", b, err)
	}
	if out := b.ok("cat", "--vault", "base", "/f"); out != "one" {
		t.Fatalf("the other host reads %q beside the writer", out)
	}
	code, out, _ := b.run("", "--json", "write", "--vault", "base", "/g", "two")
	if code == 0 || !strings.Contains(out, `"VaultLocked"`) || !strings.Contains(out, fmt.Sprintf("pid %d", m.PID)) {
		t.Fatalf("second writer while the mount holds the lease: exit %d\n%s", code, out)
	}
	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	for {
		code, out, _ = b.run("", "--json", "write", "--vault", "base", "/g", "two")
		if code == 0 {
			break
		}
		if !strings.Contains(out, `"VaultLocked"`) {
			t.Fatalf("write after the holder died: exit %d\n%s", code, out)
		}
		if time.Since(killed) > ttl+10*time.Second {
			t.Fatalf("the dead holder's lease did not expire: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(killed)
	if took < ttl/2 {
		t.Errorf("took over %v after the kill, before the lease (%v) could expire", took, ttl)
	}
	t.Logf("took over %v after SIGKILL (lease %v)", took.Round(time.Millisecond), ttl)
	if out := a.ok("cat", "--vault", "base", "/g"); out != "two" {
		t.Fatalf("the first host reads %q", out)
	}
}

// TestFleetProxyExec: proxy exec on a fork of a store's vault made by
// another home; the run's checkpoint and files are seen by the first.
func TestFleetProxyExec(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
	dsn := pgtest.DSN(t)
	bin := avfsBinary(t)
	a, b := newHost(t, bin, dsn), newHost(t, bin, dsn)
	a.ok("vault", "create", "base")
	a.ok("write", "--vault", "base", "/in.txt", "input")
	b.ok("vault", "fork", "base", "task")
	code, out, errOut := b.run("", "--json", "--vault", "task", "proxy", "exec", "--shell", "cat in.txt > out.txt; echo done")
	if code != 0 || !strings.Contains(out, `"exit_code": 0`) {
		t.Fatalf("proxy exec: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "password") || strings.Contains(out, "AVFS_STORE") {
		t.Errorf("the envelope names the store's address: %s", out)
	}
	if got := a.ok("cat", "--vault", "task", "/out.txt"); got != "input" {
		t.Fatalf("the first host reads %q from the run's output", got)
	}
	if got := a.ok("checkpoint", "list", "--vault", "task"); !strings.Contains(got, "proxy-") {
		t.Errorf("the run's checkpoint is not listed on the other host:\n%s", got)
	}
}
