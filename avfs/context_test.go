package avfs_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/avfs"
)

// TestExecContext: ending Exec's ctx while the command runs stops it
// (SIGTERM to its group) within the grace period; the run is recorded as
// interrupted with what it changed, and err is Interrupted and
// context.Canceled. An already ended ctx runs nothing; a deadline shows
// as context.DeadlineExceeded.
func TestExecContext(t *testing.T) {
	needMount(t)
	t.Parallel()
	h := newTestHome(t)
	v := newVault(t, h, "c")
	const grace = time.Second

	ctx, cancel := context.WithCancel(context.Background())
	marker := fmt.Sprintf("20.%06d", rand.IntN(1e6))
	at := make(chan time.Time, 1) // when the running command was cancelled; zero: it did not start
	go func() {
		var t time.Time
		if waitForArgv(10*time.Second, "sleep", marker) {
			t = time.Now()
		}
		cancel()
		at <- t
	}()
	env, err := h.Exec(ctx, avfs.ExecRequest{Vault: "c", Shell: "echo x > x.txt; sleep " + marker, Grace: grace})
	cancelled := <-at
	took := time.Since(cancelled)
	if cancelled.IsZero() {
		t.Fatalf("the command did not start: %+v, %v", env, err)
	}
	wantKind(t, err, avfs.Interrupted)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v is not context.Canceled", err)
	}
	if took > grace+2*time.Second {
		t.Errorf("Exec returned %s after the cancel, want under %s", took, grace+2*time.Second)
	}
	if env == nil || env.Result.State != avfs.StateInterrupted || env.Success || env.Result.Signal == nil || *env.Result.Signal != "SIGTERM" {
		t.Fatalf("envelope of the cancelled run: %+v", env)
	}
	if len(env.Result.Changes) != 1 || env.Result.Changes[0].Path != "/x.txt" {
		t.Errorf("changes: %+v", env.Result.Changes)
	}
	if waitForArgv(0, "sleep", marker) {
		t.Errorf("the command still runs after Exec returned")
	}
	if _, err := h.Undo("c", env.ID); err != nil {
		t.Errorf("undo of the interrupted run: %v", err)
	}

	// An ended ctx: nothing is recorded, no checkpoint is taken.
	env, err = h.Exec(ctx, avfs.ExecRequest{Vault: "c", Argv: []string{"true"}})
	wantKind(t, err, avfs.Interrupted)
	if env != nil {
		t.Errorf("a run with an ended ctx has an envelope: %+v", env)
	}
	if cps, _ := v.Checkpoints(); len(cps) != 1 {
		t.Errorf("checkpoints after the runs: %+v, want the interrupted run's only", cps)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer dcancel()
	env, err = h.Exec(dctx, avfs.ExecRequest{Vault: "c", Argv: []string{"sleep", "20"}, Grace: grace})
	if !errors.Is(err, context.DeadlineExceeded) || env == nil || env.Result.State != avfs.StateInterrupted {
		t.Errorf("past the deadline: %v, %+v", err, env)
	}

	// Mount with an ended ctx starts nothing.
	dir := t.TempDir()
	_, err = h.Mount(ctx, "c", dir, nil)
	wantKind(t, err, avfs.Interrupted)
	if mounts, _ := h.Mounts(); len(mounts) != 0 {
		t.Errorf("mounts after a cancelled Mount: %+v", mounts)
	}
}

// waitForArgv reports whether a process with exactly argv runs, waiting
// up to wait for it to appear.
func waitForArgv(wait time.Duration, argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	deadline := time.Now().Add(wait)
	for {
		paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && string(b) == want {
				if st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
					return true
				}
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
