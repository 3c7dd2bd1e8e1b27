package avfs_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	if env == nil || env.Result.State != avfs.StateInterrupted || env.Success || env.Result.Signal != "SIGTERM" {
		t.Fatalf("envelope of the cancelled run: %+v", env)
	}
	if len(env.Result.Changes) != 1 || env.Result.Changes[0].Path != "/x.txt" {
		t.Errorf("changes: %+v", env.Result.Changes)
	}
	if waitForArgv(0, "sleep", marker) {
		t.Errorf("the command still runs after Exec returned")
	}
	// Undo with the ended ctx changes nothing; with a live one it undoes.
	_, err = h.Undo(ctx, "c", env.ID)
	wantKind(t, err, avfs.Interrupted)
	if _, err := v.Stat(t.Context(), "/x.txt"); err != nil {
		t.Errorf("an Undo with an ended ctx changed the vault: %v", err)
	}
	if _, err := h.Undo(context.Background(), "c", env.ID); err != nil {
		t.Errorf("undo of the interrupted run: %v", err)
	}

	// An ended ctx: nothing is recorded, no checkpoint is taken.
	env, err = h.Exec(ctx, avfs.ExecRequest{Vault: "c", Argv: []string{"true"}})
	wantKind(t, err, avfs.Interrupted)
	if env != nil {
		t.Errorf("a run with an ended ctx has an envelope: %+v", env)
	}
	if cps, _ := v.Checkpoints(t.Context()); len(cps) != 1 {
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
	if mounts, _ := h.Mounts(t.Context()); len(mounts) != 0 {
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

// TestExecContextBeforeCommand: a ctx that ends while the run's mount is
// starting stops the mount's server and runs nothing: the run is recorded
// as interrupted, with no exit code, and leaves no mount or server. The
// cancel races the mount's start; an attempt whose mount won (the command
// started, and was then stopped) is checked too and tried again.
func TestExecContextBeforeCommand(t *testing.T) {
	needMount(t)
	t.Parallel()
	h := newTestHome(t)
	for attempt := range 5 {
		vault := fmt.Sprint("b", attempt)
		newVault(t, h, vault)
		logs, _ := filepath.Glob(filepath.Join(h.Dir(), "mounts", "*.log"))
		for _, l := range logs {
			os.Remove(l)
		}
		ctx, cancel := context.WithCancel(context.Background())
		starting := make(chan bool, 1) // the mount's start was seen
		go func() {
			defer cancel()
			// The mount's log is opened just before its server starts.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if logs, _ := filepath.Glob(filepath.Join(h.Dir(), "mounts", "*.log")); len(logs) > 0 {
					starting <- true
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
			starting <- false
		}()
		env, err := h.Exec(ctx, avfs.ExecRequest{Vault: vault, Shell: "echo ran > ran.txt; sleep 20", Linger: avfs.NoLinger,
			Transport: avfs.TransportFUSE}) // it watches the FUSE server start
		if !<-starting {
			t.Fatalf("the mount's start was not seen: %+v, %v", env, err)
		}
		wantKind(t, err, avfs.Interrupted)
		if env == nil || env.Result.State != avfs.StateInterrupted {
			t.Fatalf("a run interrupted while mounting: %+v", env)
		}
		left := func() int {
			return findProcess(func(argv []string) bool { return slices.Contains(argv, h.Dir()) })
		}
		for i := 0; i < 100 && left() != 0; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if pid := left(); pid != 0 {
			t.Fatalf("a process of the run (pid %d) still runs", pid)
		}
		if mounts, err := h.Mounts(t.Context()); err != nil || len(mounts) != 0 {
			t.Fatalf("mounts after the interrupted run: %+v, %v", mounts, err)
		}
		if env.Result.ExitCode != nil {
			t.Logf("attempt %d: the mount was ready before the cancel", attempt)
			continue
		}
		if env.Result.Error == nil || env.Result.Error.Kind != avfs.Interrupted {
			t.Errorf("the run's error: %+v, want Interrupted", env.Result.Error)
		}
		v, err := h.Open(t.Context(), vault)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if _, err := v.Stat(t.Context(), "/ran.txt"); !avfs.IsKind(err, avfs.NotFound) {
			t.Errorf("the command ran: %v", err)
		}
		return
	}
	t.Fatal("in 5 attempts the mount was always ready before the cancel")
}

// findProcess returns the pid of a running process (not a zombie) whose
// argv keep accepts, or 0.
func findProcess(keep func(argv []string) bool) int {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		if keep(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")) {
			var pid int
			fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
			return pid
		}
	}
	return 0
}
