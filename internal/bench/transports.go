package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// transportEnvelope is the part of an envelope the transports bench reads.
type transportEnvelope struct {
	Result struct {
		ExitCode  *int               `json:"exit_code"`
		State     string             `json:"state"`
		Stderr    string             `json:"stderr"`
		Transport *string            `json:"transport"`
		StageMs   map[string]float64 `json:"stage_ms"`
		Overlay   *struct {
			Materialized  bool    `json:"materialized"`
			MaterializeMs float64 `json:"materialize_ms"`
			IngestMs      float64 `json:"ingest_ms"`
			Lowers        int     `json:"lowers"`
		} `json:"overlay"`
	} `json:"result"`
}

// Transports runs the same work through `avfs proxy exec` on each
// transport and directly on the native disk, in one run: the ratio is
// the run's execute and summarize stages (the overlay's ingest is in
// summarize) over the native time. Each workload starts from the same
// vault state (a checkpoint restored before every run), and overlay runs
// are measured warm (its layer cache holds the state) after one run that
// materializes it, whose cost is printed apart.
func Transports(cfg Config) error {
	bin, err := avfsBinary()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(cfg.Out, "\n== transports: skipped (overlay needs root) ==")
		return nil
	}
	reps := max(cfg.Reps, 1)
	work, err := os.MkdirTemp(cfg.Dir, "transports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	home := filepath.Join(work, "home")
	runDir, err := proxy.RuntimeDir(home, "")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)
	avfs := func(args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home, "AVFS_VAULT=", "AVFS_PROXY_LINGER=")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("avfs %v: %v: %.500s%.500s", args, err, out, ee.Stderr)
		}
		return out, err
	}
	run := func(tr, script string) (transportEnvelope, error) {
		var e transportEnvelope
		out, err := avfs("proxy", "exec", "--json", "--isolate", "off", "--linger", "0", "--checkpoint", "never",
			"--transport", tr, "--shell", script)
		if err != nil {
			return e, err
		}
		if err := json.Unmarshal(out, &e); err != nil {
			return e, err
		}
		if e.Result.State != "completed" || e.Result.ExitCode == nil || *e.Result.ExitCode != 0 {
			return e, fmt.Errorf("proxy exec --transport %s %q: state %s: %.300s", tr, script, e.Result.State, e.Result.Stderr)
		}
		return e, nil
	}

	type workload struct {
		name, setup, script, target string
	}
	gitSetup := `git init -q r && cd r && git config user.email b@b && git config user.name b &&
for d in $(seq 20); do mkdir d$d; for f in $(seq 100); do echo "line $d $f" > d$d/f$f; done; done &&
git add -A && git commit -qm init`
	gitRound := `cd r && git status --short >/dev/null && echo edit >> d1/f1 && git add -A && git commit -qm edit && git status --short >/dev/null`
	readSetup := `for d in $(seq 50); do mkdir t$d; for f in $(seq 100); do echo "content of $d $f" > t$d/f$f; done; done`
	loads := []workload{
		{name: "10,000 creates in 100 dirs", target: "1.5x",
			script: `for d in $(seq 100); do mkdir c$d; for f in $(seq 100); do : > c$d/f$f; done; done`},
		{name: "git round (2,000 files)", setup: gitSetup, script: gitRound, target: "1.5x"},
		{name: "read a 5,000-file tree", setup: readSetup, script: `find . -path ./r -prune -o -type f -exec cat {} + >/dev/null`, target: "1.2x"},
	}
	if _, err := avfs("vault", "create", "tb", "--use"); err != nil {
		return err
	}
	// The native side works beside the overlay's upper dirs, in the
	// runtime dir: directories of one filesystem differ here (a create
	// under a crowded /tmp cost four times one under /run).
	nativeDir := filepath.Join(runDir, "native")
	if err := os.MkdirAll(nativeDir, 0o755); err != nil {
		return err
	}
	for _, w := range loads {
		if w.setup != "" {
			if _, err := run("fuse", w.setup); err != nil {
				return err
			}
			if err := sh(nativeDir, w.setup); err != nil {
				return err
			}
		}
	}
	if _, err := avfs("checkpoint", "save", "base"); err != nil {
		return err
	}
	if err := os.Rename(nativeDir, nativeDir+".base"); err != nil {
		return err
	}
	resetNative := func() error {
		_ = os.RemoveAll(nativeDir)
		return exec.Command("cp", "-a", nativeDir+".base", nativeDir).Run()
	}
	// The first overlay run materializes the state; later ones stand on
	// the cache.
	first, err := run("overlay", "true")
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "\n== transports through proxy exec (median of %d; ratio = (execute + summarize) / native) ==\n", reps)
	if o := first.Result.Overlay; o != nil {
		fmt.Fprintf(cfg.Out, "first overlay run materialized %v in %.1f ms (mount stage %.1f ms)\n", o.Materialized, o.MaterializeMs, first.Result.StageMs["mount"])
	}
	fmt.Fprintf(cfg.Out, "%-30s %-10s %-26s %-26s %s\n", "workload", "native", "fuse (exec+sum, ratio)", "overlay (exec+sum, ratio)", "target")
	for _, w := range loads {
		// The copy of the base tree is not timed: only the work.
		var nds []time.Duration
		for range reps {
			if err := resetNative(); err != nil {
				return err
			}
			// The copy's writeback would otherwise slow the work timed.
			if err := exec.Command("sync").Run(); err != nil {
				return err
			}
			start := time.Now()
			if err := sh(nativeDir, w.script); err != nil {
				return err
			}
			nds = append(nds, time.Since(start))
		}
		nat := medianOf(nds)
		cell := map[string]string{}
		for _, tr := range []string{"fuse", "overlay"} {
			var ds []time.Duration
			for range reps {
				if _, err := avfs("checkpoint", "restore", "base"); err != nil {
					return err
				}
				e, err := run(tr, w.script)
				if err != nil {
					return err
				}
				ds = append(ds, time.Duration((e.Result.StageMs["execute"]+e.Result.StageMs["summarize"])*1e6))
			}
			slices.Sort(ds)
			d := ds[len(ds)/2]
			cell[tr] = fmt.Sprintf("%s %.2fx (%.2f-%.2f)", ms(d), float64(d)/float64(nat), float64(ds[0])/float64(nat), float64(ds[len(ds)-1])/float64(nat))
		}
		fmt.Fprintf(cfg.Out, "%-30s %-10s %-26s %-26s ≤ %s\n", w.name, ms(nat), cell["fuse"], cell["overlay"], w.target)
	}
	return bigVaultRuns(cfg, work, avfs, run)
}

// bigVaultRuns measures the first overlay run on a 100,000-file vault
// (it materializes the state) and the set-up of the second (the mount
// stage: finding the cached layers and mounting).
const bigFiles = 100_000

func bigVaultRuns(cfg Config, work string, avfs func(...string) ([]byte, error), run func(tr, script string) (transportEnvelope, error)) error {
	h, err := registry.Open(filepath.Join(work, "home"))
	if err != nil {
		return err
	}
	v, err := h.Create("big", registry.CreateOptions{})
	if err != nil {
		return err
	}
	err = populate(v, bigFiles, 64)
	v.Close()
	if err != nil {
		return err
	}
	if _, err := avfs("vault", "use", "big"); err != nil {
		return err
	}
	var lines []string
	for i := range 3 {
		e, err := run("overlay", "true")
		if err != nil {
			return err
		}
		o := e.Result.Overlay
		if o == nil {
			return fmt.Errorf("an overlay run without an overlay record")
		}
		lines = append(lines, fmt.Sprintf("run %d: mount stage %.1f ms (materialized %v: %.1f ms, %d lowers), summarize %.1f ms",
			i+1, e.Result.StageMs["mount"], o.Materialized, o.MaterializeMs, o.Lowers, e.Result.StageMs["summarize"]))
	}
	fmt.Fprintf(cfg.Out, "%d-file vault through overlay, `proxy exec -- true`:\n  %s\n", bigFiles, strings.Join(lines, "\n  "))
	fmt.Fprintln(cfg.Out, "target: the second run's set-up (mount stage) ≤ 10 ms")
	return nil
}
