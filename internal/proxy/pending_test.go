package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPendingUpperAfterKill SIGKILLs a real `avfs proxy exec --transport
// overlay` while its command sleeps: the run's upper is left un-ingested
// (and its overlay mounted). fsck reports it with what to do and changes
// nothing; the next command that opens the vault — a plain `avfs write`,
// not an overlay run — ingests it first, so that neither the run's write
// nor the later one is lost when the next overlay run starts.
// With a size quota the upper is on a tmpfs of its own, which outlives
// the kill as the overlay does: the ingest reads it and unmounts it.
func TestPendingUpperAfterKill(t *testing.T) {
	for _, quota := range []string{"", "100"} {
		name := "no quota"
		if quota != "" {
			name = "quota, upper on tmpfs"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testPendingUpperAfterKill(t, quota)
		})
	}
}

func testPendingUpperAfterKill(t *testing.T, quota string) {
	e := newEnv(t)
	if quota != "" {
		if code, out, errOut := e.avfs("", "quota", "set", "max_size_mb", quota); code != 0 {
			t.Fatalf("quota set: %s %s", out, errOut)
		}
	}
	bin := avfsBinary(t)
	marker := fmt.Sprintf("30.%06d", rand.IntN(1e6))
	cmd := exec.Command(bin, "--json", "proxy", "exec", "--transport", "overlay", "--linger", "0",
		"--shell", "echo run > run.txt; sleep "+marker)
	cmd.Env = append(withoutXDG(os.Environ()), "AVFS_HOME="+e.home, "AVFS_VAULT=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	pid := waitForProcess(t, done, "sleep", marker)
	_ = cmd.Process.Kill()
	<-done
	_ = syscall.Kill(pid, syscall.SIGKILL) // if the sandbox did not take it down with avfs
	if !processGone(pid) {
		t.Fatalf("the run's command %d outlived the kill", pid)
	}

	fsck := func() (pending []string) {
		t.Helper()
		code, stdout, stderr := e.avfs("", "--json", "fsck")
		var r struct {
			OK          bool `json:"ok"`
			PendingRuns []struct {
				Dir    string `json:"dir"`
				Action string `json:"action"`
			} `json:"pending_runs"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || !r.OK {
			t.Fatalf("fsck: exit %d %s %s", code, stdout, stderr)
		}
		for _, p := range r.PendingRuns {
			if !strings.Contains(p.Action, "ingests it") {
				t.Errorf("pending run without what to do: %+v", p)
			}
			pending = append(pending, p.Dir)
		}
		return pending
	}
	pend := fsck()
	if len(pend) != 1 {
		t.Fatalf("fsck after the kill reports pending runs %v, want one (avfs said %s)", pend, out.String())
	}
	if _, err := os.Stat(filepath.Join(pend[0], "rw", "upper")); (err == nil) != (quota != "") {
		t.Errorf("the upper on a tmpfs: %v, want it with a quota only", err)
	}
	if _, err := os.Stat(pend[0]); err != nil {
		t.Fatalf("fsck changed the pending run: %v", err)
	}
	if again := fsck(); len(again) != 1 {
		t.Fatalf("a second fsck reports %v: the first changed something", again)
	}

	code, _, stderr := e.avfs("", "write", "/after.txt", "after")
	if code != 0 || !strings.Contains(stderr, "ingested the overlay run") {
		t.Fatalf("write after the kill: exit %d %s", code, stderr)
	}
	if p := fsck(); len(p) != 0 {
		t.Errorf("fsck after the write still reports %v", p)
	}
	e.exec(0, "", "--transport", "overlay", "--", "true")
	for path, want := range map[string]string{"/run.txt": "run\n", "/after.txt": "after"} {
		if code, got, errOut := e.avfs("", "cat", path); code != 0 || got != want {
			t.Errorf("%s after the next overlay run: %q (exit %d %s), want %q", path, got, code, errOut, want)
		}
	}
}

func withoutXDG(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			out = append(out, kv)
		}
	}
	return out
}
