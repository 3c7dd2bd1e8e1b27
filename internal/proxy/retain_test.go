package proxy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// Each run prunes the vault's run checkpoints to its run-checkpoints
// setting, newest kept; other checkpoints stay. A run whose checkpoint
// went cannot be undone, and says why.
func TestRunCheckpointRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, out, _ := e.avfs("", "--json", "vault", "info")
	var info struct {
		Settings struct {
			RunCheckpoints int `json:"run_checkpoints"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Settings.RunCheckpoints != 50 {
		t.Fatalf("vault info: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "vault", "set", "v", "run-checkpoints=-1"); code != 5 || !strings.Contains(out, "InvalidInput") {
		t.Errorf("vault set run-checkpoints=-1: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "vault", "set", "v", "run-checkpoints=2"); code != 0 || !strings.Contains(out, `"run_checkpoints": 2`) {
		t.Fatalf("vault set: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "checkpoint", "save", "mine"); code != 0 {
		t.Fatalf("checkpoint save: %s", out)
	}
	var runs []*proxy.Envelope
	for _, script := range []string{"echo 1 > one", "echo 2 > two", "echo 3 > three", "rm one"} {
		runs = append(runs, e.exec(0, "", "--shell", script))
	}
	want := []string{"mine", proxy.CheckpointName(runs[2].ID), proxy.CheckpointName(runs[3].ID)}
	if got := e.checkpoints(); !slices.Equal(got, want) {
		t.Errorf("checkpoints %v, want %v", got, want)
	}
	code, out, _ = e.avfs("", "--json", "proxy", "undo", runs[0].ID)
	if code != 3 || !strings.Contains(out, `"error": "CheckpointNotFound"`) || !strings.Contains(out, "pruned") {
		t.Errorf("undo of a pruned run: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "cat", "/one"); code == 0 || out != "" {
		t.Errorf("the refused undo changed the vault: %d %q", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "undo", runs[2].ID); code != 0 {
		t.Fatalf("undo of a kept run: %s", out)
	}
	if code, out, _ := e.avfs("", "ls", "/"); code != 0 || out != "one\ntwo\n" {
		t.Errorf("after the undo: %q", out)
	}
	e.fsck()
}
