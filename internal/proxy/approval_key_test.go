package proxy

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestApprovalKey: the key is made once, 0600, by whichever approve comes
// first; a key others can read is refused; the MAC covers every field it
// binds.
func TestApprovalKey(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if _, err := approvalKey(home, false); !errs.Is(err, ApprovalForged) {
		t.Fatalf("no key, not creating: %v", err)
	}
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := approvalKey(home, true)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if string(k) != string(keys[0]) || len(k) != keySize {
			t.Fatalf("racing approves made different keys")
		}
	}
	path := filepath.Join(home, keyDir, keyFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := approvalKey(home, true); !errs.Is(err, errs.PermissionDenied) {
		t.Fatalf("a group-readable key: %v", err)
	}

	e := &Envelope{ID: "id", Request: RequestInfo{Vault: "v", Cwd: "/", CommandMode: "argv", Command: []string{"echo", "a b"}},
		Result: Result{Approval: &Approval{ExpiresAt: time.Unix(100, 0)}}}
	base := approvalMAC(keys[0], e)
	for name, change := range map[string]func(*Envelope){
		"id":      func(e *Envelope) { e.ID = "id2" },
		"vault":   func(e *Envelope) { e.Request.Vault = "w" },
		"cwd":     func(e *Envelope) { e.Request.Cwd = "/x" },
		"mode":    func(e *Envelope) { e.Request.CommandMode = "shell" },
		"command": func(e *Envelope) { e.Request.Command = []string{"echo a", "b"} },
		"expiry":  func(e *Envelope) { e.Result.Approval.ExpiresAt = time.Unix(101, 0) },
	} {
		c := *e
		c.Request.Command = append([]string(nil), e.Request.Command...)
		ap := *e.Result.Approval
		c.Result.Approval = &ap
		change(&c)
		if approvalMAC(keys[0], &c) == base {
			t.Errorf("the MAC does not cover the %s", name)
		}
	}
}

// TestLiveRegistry: a run's registration names this process and goes with
// it; one of a process that is gone is pruned by the next run.
func TestLiveRegistry(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := liveDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "2147483000-old")
	if err := os.WriteFile(stale, []byte("old 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{Home: &registry.Home{Dir: home}}
	unmark, err := rt.markLive("run1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a dead process's registration stays: %v", err)
	}
	_, start, _ := procStat(os.Getpid())
	if id := liveRunOf(home, os.Getpid(), start); id != "run1" {
		t.Errorf("this process runs %q", id)
	}
	if err := rt.outsideRun("proxy approve"); !errs.Is(err, ApprovalFromRun) {
		t.Errorf("approve in a registered process: %v", err)
	}
	unmark()
	if id := liveRunOf(home, os.Getpid(), start); id != "" {
		t.Errorf("after the run, this process runs %q", id)
	}
	rt.Getenv = func(string) string { return "" }
	if err := rt.outsideRun("proxy approve"); err != nil {
		t.Errorf("approve outside any run: %v", err)
	}
}
