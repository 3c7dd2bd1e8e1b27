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
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// TestSignalStopsRun sends SIGINT or SIGTERM to a real `avfs proxy exec`
// while its command sleeps: the command's group gets SIGTERM, then SIGKILL
// after the grace period when it ignores SIGTERM; avfs returns within
// the grace period and a margin, prints the envelope (state interrupted,
// the changes made before the signal), exits 130, and leaves no process
// and no mount behind. The run can be undone.
func TestSignalStopsRun(t *testing.T) {
	const grace = time.Second
	cases := []struct {
		name     string
		sig      syscall.Signal
		trapTerm bool   // the command ignores SIGTERM
		killedBy string // the signal that ends the command
	}{
		{"SIGINT", syscall.SIGINT, false, "SIGTERM"},
		{"SIGTERM", syscall.SIGTERM, false, "SIGTERM"},
		{"SIGINT-command-ignores-SIGTERM", syscall.SIGINT, true, "SIGKILL"},
	}
	bin := avfsBinary(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			marker := fmt.Sprintf("20.%06d", rand.IntN(1e6)) // an argv no other process has
			script := "echo before > before.txt; sleep " + marker
			if c.trapTerm {
				script = "trap '' TERM; " + script
			}
			cmd := exec.Command(bin, "--json", "proxy", "exec", "--linger", "0", "--grace", grace.String(), "--shell", script)
			cmd.Env = append(os.Environ(), "AVFS_HOME="+e.home, "AVFS_VAULT=", "GORACE=atexit_sleep_ms=0")
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			defer func() {
				select {
				case <-done:
				default:
					_ = cmd.Process.Kill()
					<-done
				}
			}()

			pid := waitForProcess(t, done, "sleep", marker)
			sent := time.Now()
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("avfs still runs 15 s after %s (grace %s)", c.sig, grace)
			}
			took := time.Since(sent)
			t.Logf("avfs exited %s after %s", took.Round(time.Millisecond), c.sig)
			if limit := grace + 2*time.Second; took > limit {
				t.Errorf("avfs took %s after %s to exit, want under %s", took, c.sig, limit)
			}
			if c.trapTerm && took < grace {
				t.Errorf("a command that ignores SIGTERM was killed after %s, before the grace period (%s)", took, grace)
			}
			if code := cmd.ProcessState.ExitCode(); code != 130 {
				t.Errorf("exit code %d, want 130\n%s%s", code, out.String(), errOut.String())
			}
			validate(t, out.String())
			var env proxy.Envelope
			if err := json.Unmarshal(out.Bytes(), &env); err != nil {
				t.Fatalf("no envelope: %v\n%s\n%s", err, out.String(), errOut.String())
			}
			r := env.Result
			if r.State != proxy.StateInterrupted || env.Success || r.Signal == nil || *r.Signal != c.killedBy || r.TimedOut {
				t.Errorf("envelope after %s: state %s, success %v, signal %v, timed_out %v; want interrupted by %s",
					c.sig, r.State, env.Success, deref(r.Signal), r.TimedOut, c.killedBy)
			}
			if len(r.Changes) != 1 || r.Changes[0].Path != "/before.txt" {
				t.Errorf("changes of the interrupted run: %+v, want /before.txt", r.Changes)
			}
			if !processGone(pid) {
				t.Errorf("the command's sleep (pid %d) still runs", pid)
			}
			if code, out, _ := e.avfs("", "--json", "proxy", "undo"); code != 0 || !strings.Contains(out, env.ID) {
				t.Errorf("undo of the interrupted run: %d %s", code, out)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// waitForProcess returns the pid of the process whose argv is argv,
// once it runs; it fails the test if done closes or 20 s pass first.
func waitForProcess(t *testing.T, done <-chan struct{}, argv ...string) int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && string(b) == want {
				var pid int
				fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
				return pid
			}
		}
		select {
		case <-done:
			t.Fatalf("avfs exited before %q ran", argv)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%q did not start", argv)
	return 0
}

// processGone reports whether pid has exited (a zombie has: it only waits
// to be reaped), allowing a second for it to go.
func processGone(pid int) bool {
	for range 50 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:]); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
