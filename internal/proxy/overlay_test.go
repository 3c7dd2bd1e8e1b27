package proxy_test

import (
	"strings"
	"testing"
)

// TestOverlayRun: auto takes overlay as root; the run's writes are the
// vault's after it (ingested), the envelope says what served and what it
// cost, a second run stands on the first's upper and materializes
// nothing, and a run over the quota is refused whole.
func TestOverlayRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.exec(0, "", "--shell", "mkdir -p src && echo one > src/a && echo two > b && ln b c")
	r := first.Result
	if r.Transport == nil || *r.Transport != "overlay" || r.TransportReason == nil || r.Overlay == nil {
		t.Skipf("auto did not take overlay here: %v %v", r.Transport, r.TransportReason)
	}
	if !r.Overlay.Materialized || !r.Overlay.Reused || r.Overlay.IngestedFiles != 2 {
		t.Errorf("first run's overlay record: %+v", *r.Overlay)
	}
	if code, out, _ := e.avfs("", "cat", "/src/a"); code != 0 || out != "one\n" {
		t.Errorf("after the run the vault has %q (exit %d)", out, code)
	}
	// c is a hard link of b in a lower layer: the write to b copies b
	// up alone, and c keeps the old content (docs/architecture.md).
	second := e.exec(0, "", "--shell", "cat src/a; rm -rf src; echo three >> b; cat c")
	r = second.Result
	if r.Overlay == nil || r.Overlay.Materialized || r.Overlay.Lowers != 2 || r.Stdout != "one\ntwo\n" {
		t.Errorf("second run: stdout %q, overlay %+v", r.Stdout, r.Overlay)
	}
	got := map[string]string{}
	for _, c := range r.Changes {
		got[c.Path] = c.Kind
	}
	for p, k := range map[string]string{"/src": "deleted", "/src/a": "deleted", "/b": "modified", "/c": ""} {
		if got[p] != k {
			t.Errorf("change of %s: %q, want %q (all %v)", p, got[p], k, got)
		}
	}
	if m := e.mounts(); len(m) != 0 {
		t.Errorf("mounts after overlay runs: %+v", m)
	}
	// Over the quota: QuotaExceeded, and the vault as before the run.
	if code, out, errOut := e.avfs("", "quota", "set", "max_size_mb", "1"); code != 0 {
		t.Fatalf("quota set: %s %s", out, errOut)
	}
	// The command itself succeeds; the ingest refuses the run.
	code, out, _ := e.avfs("", "--json", "proxy", "exec", "--shell", "echo new > n && head -c 2000000 /dev/zero | tr '\\0' x > big")
	if code != 7 || !strings.Contains(out, `"QuotaExceeded"`) {
		t.Errorf("a run over the quota: exit %d %s", code, out)
	}
	if code, _, errOut := e.avfs("", "cat", "/n"); code == 0 || !strings.Contains(errOut, "no such file") {
		t.Errorf("a refused run left /n (exit %d %s)", code, errOut)
	}
	if code, out, errOut := e.avfs("", "--json", "fsck"); code != 0 {
		t.Errorf("fsck: %s %s", out, errOut)
	}
}
