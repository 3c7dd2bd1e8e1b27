package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// avfsBinary finds the avfs binary the benchmarks run: $AVFS_BIN,
// else bin/avfs (what `make build` writes), else avfs on PATH.
func avfsBinary() (string, error) {
	if p := os.Getenv("AVFS_BIN"); p != "" {
		return p, nil
	}
	if p, err := filepath.Abs("bin/avfs"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("avfs")
	if err != nil {
		return "", errors.New("no avfs binary: run `make build` or set AVFS_BIN")
	}
	return p, nil
}

// proxyEnvelope is the part of the envelope the benchmark reads.
type proxyEnvelope struct {
	Result struct {
		ExitCode *int               `json:"exit_code"`
		State    string             `json:"state"`
		StageMs  map[string]float64 `json:"stage_ms"`
	} `json:"result"`
}

// Proxy measures `avfs proxy exec -- true` end to end: a process of the
// avfs binary that classifies, checkpoints, mounts, runs true, summarizes
// and prints the envelope. It reports the median wall time and the median
// of each stage for the default path (the first run starts the mount's
// own serving process and leaves it, --linger, for the runs after it) and
// for runs that mount and unmount every time (--linger 0).
func Proxy(cfg Config) error {
	bin, err := avfsBinary()
	if err != nil {
		return err
	}
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		fmt.Fprintln(cfg.Out, "\n== proxy exec: skipped (needs root and /dev/fuse) ==")
		return nil
	}
	home := filepath.Join(cfg.Dir, "proxy-home")
	defer os.RemoveAll(home)
	avfs := func(args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home, "AVFS_VAULT=", "AVFS_PROXY_LINGER=")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("avfs %v: %v: %s%s", args, err, out, ee.Stderr)
		}
		return out, err
	}
	// The lingering mount goes before the home does, and then the
	// runtime dir of its mountpoint.
	if runDir, err := proxy.RuntimeDir(home, ""); err == nil {
		defer os.RemoveAll(runDir)
	}
	defer func() {
		out, _ := avfs("mounts", "--json")
		var r struct {
			Mounts []struct{ Mountpoint string } `json:"mounts"`
		}
		_ = json.Unmarshal(out, &r)
		for _, m := range r.Mounts {
			_, _ = avfs("unmount", m.Mountpoint)
		}
	}()
	if _, err := avfs("vault", "create", "bench", "--use"); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "\n== proxy exec -- true, end to end (%s; median of %d) ==\n", bin, cfg.Reps)
	fmt.Fprintf(cfg.Out, "%-34s %-12s %s\n", "run", "total", "stages (median ms)")
	for _, m := range []struct {
		label string
		reps  int
		args  []string
	}{
		{"every run mounts (--linger 0)", cfg.Reps, []string{"--linger", "0"}},
		{"default, first run (mounts)", 1, nil},
		{"default, later runs (mount reused)", cfg.Reps, nil},
		// Warm, side by side: the same runs isolated and not.
		{"warm, --isolate on", cfg.Reps, []string{"--isolate", "on"}},
		{"warm, --isolate off", cfg.Reps, []string{"--isolate", "off"}},
	} {
		stages := map[string][]float64{}
		args := append(append([]string{"proxy", "exec", "--json"}, m.args...), "--", "true")
		total, err := median(m.reps, func() error {
			out, err := avfs(args...)
			if err != nil {
				return err
			}
			var e proxyEnvelope
			if err := json.Unmarshal(out, &e); err != nil {
				return err
			}
			if e.Result.State != "completed" || e.Result.ExitCode == nil || *e.Result.ExitCode != 0 {
				return fmt.Errorf("proxy exec -- true: state %s", e.Result.State)
			}
			for k, v := range e.Result.StageMs {
				stages[k] = append(stages[k], v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		line := ""
		for _, s := range []string{"request", "classify", "checkpoint", "mount", "execute", "summarize", "report"} {
			v := stages[s]
			slices.Sort(v)
			if len(v) > 0 {
				line += fmt.Sprintf("%s %.2f  ", s, v[len(v)/2])
			}
		}
		fmt.Fprintf(cfg.Out, "%-34s %-12s %s\n", m.label, ms(total), line)
	}
	fmt.Fprintf(cfg.Out, "target: under %s median, end to end with mount and envelope, isolated too\n", ms(25*time.Millisecond))
	return namespaceCost(cfg)
}

// namespaceCost measures what the isolation itself costs to start:
// bubblewrap making the namespaces of a run (user, mount, PID, IPC, UTS,
// network, a read-only root, a private /tmp) around true, beside true
// started directly.
func namespaceCost(cfg Config) error {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		fmt.Fprintln(cfg.Out, "namespace set-up: skipped (no bwrap; Debian: bubblewrap)")
		return nil
	}
	plain, err := median(cfg.Reps, func() error { return exec.Command("true").Run() })
	if err != nil {
		return err
	}
	ns, err := median(cfg.Reps, func() error {
		return exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
			"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--tmpfs", "/tmp", "--", "true").Run()
	})
	if err != nil {
		return fmt.Errorf("bwrap: %w", err)
	}
	fmt.Fprintf(cfg.Out, "%-34s %-12s (true alone: %s; a run's set-up adds its hidden paths and binds)\n", "namespace set-up (bwrap true)", ms(ns), ms(plain))
	return nil
}
