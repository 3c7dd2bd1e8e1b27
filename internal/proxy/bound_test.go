package proxy_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// TestOverlayUpperBounded: on a vault with a size quota an overlay run's
// upper is on a tmpfs of that size (plus slack): a runaway write fails
// with ENOSPC inside the command, the ingest refuses the run whole with
// QuotaExceeded, the vault keeps its state and fsck finds it clean, and
// no tmpfs is left mounted. A run within the quota is ingested, and its
// upper, copied off the tmpfs, is the next run's lower.
func TestOverlayUpperBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if code, out, errOut := e.avfs("", "quota", "set", "max_size_mb", "1"); code != 0 {
		t.Fatalf("quota set: %s %s", out, errOut)
	}
	ok := e.exec(0, "", "--transport", "overlay", "--shell", "mkdir d && echo one > d/a && ln d/a d/b").Result
	if ok.Overlay == nil || ok.Overlay.UpperBoundBytes <= 1<<20 || !ok.Overlay.Reused {
		t.Fatalf("a run within the quota: overlay %+v", ok.Overlay)
	}
	next := e.exec(0, "", "--transport", "overlay", "--shell", "cat d/a; stat -c %h d/b").Result
	if next.Overlay == nil || next.Overlay.Materialized || next.Stdout != "one\n2\n" {
		t.Errorf("the run after: stdout %q, overlay %+v", next.Stdout, next.Overlay)
	}

	const runaway = `echo new > n; if head -c 100000000 /dev/zero > big; then echo wrote all; else echo refused; fi`
	code, out, _ := e.avfs("", "--json", "proxy", "exec", "--transport", "overlay", "--shell", runaway)
	if code != 7 || !strings.Contains(out, `"QuotaExceeded"`) {
		t.Errorf("a runaway run: exit %d, want 7 (QuotaExceeded)\n%s", code, out)
	}
	// The error is what avfs prints; the run's record holds the rest.
	_, hist, _ := e.avfs("", "--json", "proxy", "history", "--limit", "1")
	var h struct {
		Runs []struct{ ID string } `json:"runs"`
	}
	if err := json.Unmarshal([]byte(hist), &h); err != nil || len(h.Runs) != 1 {
		t.Fatalf("history: %v %s", err, hist)
	}
	_, shown, _ := e.avfs("", "--json", "proxy", "show", h.Runs[0].ID)
	var env proxy.Envelope
	if err := json.Unmarshal([]byte(shown), &env); err != nil {
		t.Fatalf("%v\n%s", err, shown)
	}
	r := env.Result
	if r.Error == nil || r.Error.Error != "QuotaExceeded" {
		t.Errorf("the run's record: error %+v", r.Error)
	}
	if r.Stdout != "refused\n" || !strings.Contains(r.Stderr, "No space left on device") {
		t.Errorf("the runaway write was not stopped inside the command: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	if r.Overlay == nil || r.Overlay.UpperBoundBytes <= 0 || r.Overlay.UpperBoundBytes > 64<<20 {
		t.Errorf("overlay record of the runaway run: %+v", r.Overlay)
	}
	if code, _, errOut := e.avfs("", "cat", "/n"); code == 0 || !strings.Contains(errOut, "no such file") {
		t.Errorf("a refused run left /n (exit %d %s)", code, errOut)
	}
	if code, out, errOut := e.avfs("", "cat", "/d/a"); code != 0 || out != "one\n" {
		t.Errorf("/d/a after the refused run: %q %s", out, errOut)
	}
	var fsck struct {
		OK          bool       `json:"ok"`
		PendingRuns []struct{} `json:"pending_runs"`
	}
	if code, out, errOut := e.avfs("", "--json", "fsck"); code != 0 || json.Unmarshal([]byte(out), &fsck) != nil || !fsck.OK || len(fsck.PendingRuns) != 0 {
		t.Errorf("fsck: %d %s %s", code, out, errOut)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	runDir, _ := proxy.RuntimeDir(e.home, "")
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, runDir) {
			t.Errorf("left mounted: %s", l)
		}
	}
}
