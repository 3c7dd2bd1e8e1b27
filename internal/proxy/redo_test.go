package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// redo runs `avfs --json proxy redo ARGS...` and returns its exit code
// and the document it printed.
func (e *env) redo(args ...string) (int, map[string]any) {
	e.t.Helper()
	code, out, errOut := e.avfs("", append([]string{"--json", "proxy", "redo"}, args...)...)
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		e.t.Fatalf("proxy redo %v: %v\n%s%s", args, err, out, errOut)
	}
	return code, doc
}

// same fails the test unless states a and b hold the same tree.
func (e *env) same(a, b string) {
	e.t.Helper()
	code, out, errOut := e.avfs("", "--json", "diff", a, b)
	if code != 0 || !strings.Contains(out, `"changes": []`) {
		e.t.Errorf("diff %s %s: %d\n%s%s", a, b, code, out, errOut)
	}
}

func (e *env) fsck() {
	e.t.Helper()
	if code, out, errOut := e.avfs("", "--json", "fsck", "v"); code != 0 {
		e.t.Errorf("fsck: %d\n%s%s", code, out, errOut)
	}
}

// Undo and redo move between a run's before and after states exactly, one
// run at a time; a redo that does not follow its undo is Conflict and
// changes nothing.
func TestRedo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(0, "", "--shell", "echo 0 > base.txt")
	first := e.exec(0, "", "--shell", "echo 1 > one.txt; rm base.txt")
	second := e.exec(0, "", "--shell", "echo 2 > two.txt; mkdir d; echo 3 > d/three.txt")

	if code, doc := e.redo(second.ID); code != 18 || doc["error"] != "Conflict" {
		t.Errorf("redo of a run that was not undone: %d %v", code, doc)
	}
	if code, doc := e.redo(); code != 3 || doc["error"] != "NotFound" {
		t.Errorf("redo with nothing undone: %d %v", code, doc)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "undo", first.ID); code != 0 {
		t.Fatalf("undo: %s", out)
	}
	e.same("run:"+first.ID, "@")

	// second's before state is first's after state, not the undo's: refused.
	if code, doc := e.redo(second.ID); code != 18 || doc["error"] != "Conflict" {
		t.Errorf("redo of the later run first: %d %v", code, doc)
	}
	e.same("run:"+first.ID, "@")

	code, doc := e.redo()
	if code != 0 || doc["kind"] != "proxy_redo_result" || doc["run"] != first.ID || doc["undone_by"] != "undo of "+first.ID {
		t.Fatalf("redo: %d %v", code, doc)
	}
	e.same("run:"+first.ID+"^after", "@")
	if code, doc = e.redo(); code != 0 || doc["run"] != second.ID {
		t.Fatalf("second redo: %d %v", code, doc)
	}
	e.same("run:"+second.ID+"^after", "@")
	if code, doc = e.redo(); code != 3 {
		t.Errorf("redo with every run redone: %d %v", code, doc)
	}
	e.fsck()

	// undo → redo → undo round-trips.
	if code, out, _ := e.avfs("", "--json", "proxy", "undo", second.ID); code != 0 {
		t.Fatalf("undo: %s", out)
	}
	e.same("run:"+second.ID, "@")
	if code, doc = e.redo(second.ID); code != 0 {
		t.Fatalf("redo: %d %v", code, doc)
	}
	e.same("run:"+second.ID+"^after", "@")
	if code, out, _ := e.avfs("", "--json", "proxy", "undo", second.ID); code != 0 {
		t.Fatalf("undo after redo: %s", out)
	}
	e.same("run:"+second.ID, "@")
	e.fsck()

	// A write after the undo: the vault moved on, and redo leaves it so.
	if code, out, errOut := e.avfs("", "write", "/mine.txt", "mine"); code != 0 {
		t.Fatalf("write: %s%s", out, errOut)
	}
	if code, doc = e.redo(); code != 18 || doc["error"] != "Conflict" || !strings.Contains(doc["message"].(string), second.ID) {
		t.Errorf("redo after a write: %d %v", code, doc)
	}
	if code, out, _ := e.avfs("", "cat", "/mine.txt"); code != 0 || out != "mine" {
		t.Errorf("the refused redo changed the vault: %d %q", code, out)
	}
	code, out, _ := e.avfs("", "--json", "proxy", "show", second.ID)
	var rec proxy.Envelope
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Result.UndoneBy == nil {
		t.Errorf("the refused redo changed the run's record: %s", out)
	}
	e.fsck()
}
