package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// askEcho makes echo need approval in e's home, and returns a pending run.
func askEcho(t *testing.T, e *env, extra string) *proxy.Envelope {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.home, "policy.toml"),
		[]byte("version = 1\n[[rule]]\nname = \"ask\"\nprogram = [\"echo\"]\naction = \"require_approval\"\n"+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return e.exec(15, "", "--", "echo", "approved")
}

func (e *env) recordPath(id string) string { return filepath.Join(e.home, "proxy", "runs", id+".json") }

func (e *env) readRecord(id string) map[string]any {
	e.t.Helper()
	b, err := os.ReadFile(e.recordPath(id))
	if err != nil {
		e.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) writeRecord(id string, m map[string]any) {
	e.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.recordPath(id), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func approvalOf(m map[string]any) map[string]any {
	return m["result"].(map[string]any)["approval"].(map[string]any)
}

// TestApprovalEditedOnDisk: a pending record edited into "approved" does
// not run, nor does an approved record whose command was changed.
func TestApprovalEditedOnDisk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pending := askEcho(t, e, "")
	m := e.readRecord(pending.ID)
	approvalOf(m)["status"] = "approved"
	e.writeRecord(pending.ID, m)
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", pending.ID); code != 15 || !strings.Contains(out, "ApprovalForged") {
		t.Fatalf("edited into approved: %d %s", code, out)
	}

	// A real approval, whose command is then changed on disk.
	other := e.exec(15, "", "--", "echo", "approved")
	if code, out, _ := e.avfs("", "--json", "proxy", "approve", other.ID); code != 0 || !strings.Contains(out, `"mac"`) {
		t.Fatalf("approve: %d %s", code, out)
	}
	key, err := os.Stat(filepath.Join(e.home, "keys", "approval.key"))
	if err != nil || key.Mode().Perm() != 0o600 {
		t.Fatalf("approval key: %v %v", key, err)
	}
	m = e.readRecord(other.ID)
	req := m["request"].(map[string]any)
	req["command"] = []any{"echo", "forged"}
	m["result"].(map[string]any)["command"] = []any{"echo", "forged"}
	e.writeRecord(other.ID, m)
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", other.ID); code != 15 || !strings.Contains(out, "ApprovalForged") {
		t.Fatalf("approved, then edited: %d %s", code, out)
	}
}

// TestApprovalForgedRecord: a record written on disk, even a copy of a
// real approval with its MAC under another id, is not an approval.
func TestApprovalForgedRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	real := askEcho(t, e, "")
	if code, out, _ := e.avfs("", "--json", "proxy", "approve", real.ID); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	m := e.readRecord(real.ID)
	forged := strings.TrimSuffix(real.ID, real.ID[len(real.ID)-8:]) + "deadbeef"
	m["id"] = forged
	approvalOf(m)["id"] = forged
	e.writeRecord(forged, m)
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", forged); code != 15 || !strings.Contains(out, "ApprovalForged") {
		t.Fatalf("copied approval: %d %s", code, out)
	}
	delete(approvalOf(m), "mac")
	e.writeRecord(forged, m)
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", forged); code != 15 || !strings.Contains(out, "ApprovalForged") {
		t.Fatalf("approval without a MAC: %d %s", code, out)
	}
	// The real one still runs, once.
	saved := e.readRecord(real.ID)
	if env := e.exec(0, "", "--approval", real.ID); env.Result.Stdout != "approved\n" {
		t.Fatalf("real approval: %+v", env.Result)
	}
	// Its record put back as it was before the use (status and MAC)
	// does not make it count again.
	e.writeRecord(real.ID, saved)
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", real.ID); code != 15 || !strings.Contains(out, "ApprovalUsed") {
		t.Fatalf("a used approval restored on disk: %d %s", code, out)
	}
}

// TestApproveFromInsideRun: a run's command calling `avfs proxy approve`
// is refused, with the run marker and (the marker removed) by its
// ancestry; the approval stays pending.
func TestApproveFromInsideRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary stands in for avfs; a rule lets it run, as a
	// careless policy might let avfs run.
	pending := askEcho(t, e, "[[rule]]\nname = \"self\"\nprogram = [\""+filepath.Base(self)+"\"]\naction = \"allow\"\n")
	for _, argv := range [][]string{
		{self, "--json", "proxy", "approve", pending.ID},
		{"env", "-u", "AVFS_PROXY_RUN", self, "--json", "proxy", "approve", pending.ID},
		{"env", "-u", "AVFS_PROXY_RUN", self, "--json", "proxy", "reject", pending.ID},
	} {
		// Without isolation: these checks are what stands there (an
		// isolated run does not see $AVFS_HOME at all).
		run := e.exec(12, "", append([]string{"--isolate", "off", "--"}, argv...)...)
		if !strings.Contains(run.Result.Stdout+run.Result.Stderr, "ApprovalFromRun") {
			t.Errorf("%v: %s %s", argv, run.Result.Stdout, run.Result.Stderr)
		}
	}
	if st := approvalOf(e.readRecord(pending.ID))["status"]; st != "pending" {
		t.Fatalf("status after the attempts: %v", st)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "approve", pending.ID); code != 0 {
		t.Fatalf("approve from outside: %d %s", code, out)
	}
}

// TestCwdThroughSymlink: --cwd and ".." are judged through the vault's
// symlinks. With a -> ., --cwd a/a/a/a/a/a/a is the vault's root, so seven
// ".." climb out of it; a symlink to an absolute path leads to the host.
func TestCwdThroughSymlink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{{"ln", "-s", ".", "/a"}, {"ln", "-s", "/etc", "/e"}, {"mkdir", "/d"}} {
		if code, out, errOut := e.avfs("", args...); code != 0 {
			t.Fatalf("%v: %d %s %s", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{
		{"--cwd", "a/a/a/a/a/a/a", "--", "cat", "../../../../../../../etc/shadow"},
		{"--cwd", "d", "--", "cat", "../a/../x"},
		{"--", "cat", "a/../x"},
		{"--", "cat", "e/shadow"},
		{"--cwd", "e", "--", "cat", "shadow"},
	} {
		env := e.exec(14, "", args...)
		if env.Result.Decision.Action != "deny" || env.Result.ExitCode != nil {
			t.Errorf("%v: %+v", args, env.Result.Decision)
		}
	}
	// Within the workspace, symlinks and ".." are fine.
	if env := e.exec(0, "", "--cwd", "a/a/d", "--", "ls", "../a/d"); env.Result.Decision.Action != "allow" {
		t.Errorf("ls ../a/d from a/a/d: %+v", env.Result.Decision)
	}
}

// TestSymlinkMadeInLingeringMount: a symlink a run made through a mount
// that is still serving is seen by the next run's classification (its
// server answers), on both engines.
func TestSymlinkMadeInLingeringMount(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			e := newEnv(t)
			if engine != "sqlite" {
				if code, out, errOut := e.avfs("", "vault", "create", "b", "--backend", engine, "--use"); code != 0 {
					t.Fatalf("vault create: %d %s %s", code, out, errOut)
				}
			}
			e.linger = "30s"
			first := e.exec(0, "", "--transport", "fuse", "--shell", "ln -s . b && mkdir d") // a lingering mount: FUSE's
			mnt := *first.Result.Mountpoint
			t.Cleanup(func() { e.avfs("", "unmount", mnt) })
			env := e.exec(14, "", "--cwd", "b/b/b", "--", "cat", "../etc/shadow")
			if !env.Result.MountReused && env.Result.Mountpoint != nil {
				t.Errorf("denied run mounted: %+v", env.Result)
			}
			if !strings.Contains(env.Result.Decision.Reason, "climbs above the workspace root") {
				t.Errorf("reason: %s", env.Result.Decision.Reason)
			}
			// A real directory is one: the strict reading (every name a
			// link to ".") would deny this.
			// The mount's server answered: the lingering mount was not
			// disturbed by the question.
			if env := e.exec(0, "", "--cwd", "d", "--", "ls", "../b/d"); env.Result.Decision.Action != "allow" || !env.Result.MountReused {
				t.Errorf("ls ../b/d from d: reused %v, %+v", env.Result.MountReused, env.Result.Decision)
			}
		})
	}
}
