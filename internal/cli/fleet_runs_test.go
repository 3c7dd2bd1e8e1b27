package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// runOf is the id and state of a proxy run's envelope.
func runOf(t *testing.T, out string) (id, state string) {
	t.Helper()
	var e struct {
		ID     string `json:"id"`
		Result struct {
			State string `json:"state"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.ID == "" {
		t.Fatalf("not an envelope (%v):\n%s", err, out)
	}
	return e.ID, e.Result.State
}

// TestFleetProxyRuns: a run made on one host of a store is in the other's
// history and show, and the other undoes and redoes it.
func TestFleetProxyRuns(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
	dsn := pgtest.DSN(t)
	bin := avfsBinary(t)
	a, b := newHost(t, bin, dsn), newHost(t, bin, dsn)
	a.ok("vault", "create", "task")
	a.ok("write", "--vault", "task", "/in.txt", "input")
	id, _ := runOf(t, b.ok("--json", "--vault", "task", "proxy", "exec", "--checkpoint", "always", "--shell", "cat in.txt > out.txt"))
	if out := a.ok("--json", "proxy", "history", "--vault", "task"); !strings.Contains(out, id) {
		t.Fatalf("the first host's history has no run %s:\n%s", id, out)
	}
	if got, _ := runOf(t, a.ok("--json", "proxy", "show", id)); got != id {
		t.Fatalf("show %s: %s", id, got)
	}
	a.ok("--json", "proxy", "undo", id)
	if code, _, _ := b.run("", "cat", "--vault", "task", "/out.txt"); code == 0 {
		t.Fatal("out.txt is there after the other host's undo")
	}
	if out := b.ok("--json", "proxy", "show", id); !strings.Contains(out, `"undone_by": "undo of `+id+`"`) {
		t.Fatalf("the run is not marked undone on the host that made it:\n%s", out)
	}
	b.ok("--json", "proxy", "redo", id)
	if got := a.ok("cat", "--vault", "task", "/out.txt"); got != "input" {
		t.Fatalf("after redo the first host reads %q", got)
	}
	for _, h := range []*host{a, b} {
		if _, err := os.Stat(filepath.Join(h.home, "proxy", "runs")); !os.IsNotExist(err) {
			t.Errorf("home %s keeps runs of its own: %v", h.home, err)
		}
	}
}

// TestFleetApproval: an approval asked on one host is approved by a person
// on another, used on the first, and then used up on every host.
func TestFleetApproval(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
	dsn := pgtest.DSN(t)
	bin := avfsBinary(t)
	a, b := newHost(t, bin, dsn), newHost(t, bin, dsn)
	a.ok("vault", "create", "task")
	policy := "version = 1\n[[rule]]\nname = \"ask\"\nprogram = [\"echo\"]\naction = \"require_approval\"\n"
	for _, h := range []*host{a, b} {
		h.ok("vault", "list")
		if err := os.WriteFile(filepath.Join(h.home, "policy.toml"), []byte(policy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := a.run("", "--json", "--vault", "task", "proxy", "exec", "--", "echo", "approved")
	id, state := runOf(t, out)
	if code != 15 || state != "awaiting_approval" {
		t.Fatalf("exec: exit %d state %s\n%s", code, state, out)
	}
	if out := b.ok("--json", "proxy", "approve", id); !strings.Contains(out, `"status": "approved"`) {
		t.Fatalf("approve on the other host:\n%s", out)
	}
	out = a.ok("--json", "--vault", "task", "proxy", "exec", "--approval", id)
	if _, state := runOf(t, out); state != "completed" || !strings.Contains(out, `"stdout": "approved\n"`) {
		t.Fatalf("the approved run: %s\n%s", state, out)
	}
	for _, h := range []*host{a, b} {
		code, out, _ := h.run("", "--json", "--vault", "task", "proxy", "exec", "--approval", id)
		if code == 0 || !strings.Contains(out, `"ApprovalUsed"`) {
			t.Fatalf("the approval used again on %s: exit %d\n%s", h.home, code, out)
		}
		if _, err := os.Stat(filepath.Join(h.home, "keys")); !os.IsNotExist(err) {
			t.Errorf("home %s has keys of its own: %v", h.home, err)
		}
	}
}
