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
// avfs binary that classifies, checkpoints, mounts (starting the mount's
// own serving process), runs true, summarizes and prints the envelope.
// It reports the median wall time and the median of each stage, cold
// (mount and unmount in every run) and warm (a mount kept by
// --keep-mount is reused).
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
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home, "AVFS_VAULT=")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("avfs %v: %v: %s%s", args, err, out, ee.Stderr)
		}
		return out, err
	}
	if _, err := avfs("vault", "create", "bench", "--use"); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "\n== proxy exec -- true, end to end (%s; median of %d) ==\n", bin, cfg.Reps)
	fmt.Fprintf(cfg.Out, "%-6s %-12s %s\n", "mount", "total", "stages (median ms)")
	for _, warm := range []bool{false, true} {
		var mnt string
		if warm {
			out, err := avfs("proxy", "exec", "--json", "--keep-mount", "--", "true")
			if err != nil {
				return err
			}
			var e struct {
				Result struct{ Mountpoint string } `json:"result"`
			}
			_ = json.Unmarshal(out, &e)
			mnt = e.Result.Mountpoint
		}
		stages := map[string][]float64{}
		total, err := median(cfg.Reps, func() error {
			out, err := avfs("proxy", "exec", "--json", "--", "true")
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
		if mnt != "" {
			if _, uerr := avfs("unmount", mnt); uerr != nil && err == nil {
				err = uerr
			}
		}
		if err != nil {
			return err
		}
		label := "cold"
		if warm {
			label = "warm"
		}
		line := ""
		for _, s := range []string{"request", "classify", "checkpoint", "mount", "execute", "summarize", "report"} {
			v := stages[s]
			slices.Sort(v)
			if len(v) > 0 {
				line += fmt.Sprintf("%s %.2f  ", s, v[len(v)/2])
			}
		}
		fmt.Fprintf(cfg.Out, "%-6s %-12s %s\n", label, ms(total), line)
	}
	fmt.Fprintf(cfg.Out, "target: under %s median, end to end with mount and envelope\n", ms(25*time.Millisecond))
	return nil
}
