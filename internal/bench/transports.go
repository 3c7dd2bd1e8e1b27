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
		// MountReused: the run found the last one's lingering mount.
		MountReused bool `json:"mount_reused"`
	} `json:"result"`
}

// Transports runs the same work through `avfs proxy exec` on each
// transport and directly on the native disk (the same command, in a dir
// of the same filesystem as the overlay's uppers, its files just copied
// there and so in the page cache), alternating, in one run: the ratio is
// the run's execute and summarize stages (the overlay's ingest is in
// summarize) over the native time of the same rep. Each workload starts
// from the same vault state (a checkpoint restored before every run),
// and overlay runs are measured warm (its layer cache holds the state)
// after one run that materializes it, whose cost is printed apart.
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
	// npm's workload: a project and npm's cache warmed for it, outside
	// the vault; the command finds the cache through its environment.
	npmSrc, npmEnv, npmWhat, npmErr := npmProject(filepath.Join(work, "npm"))
	// The home exists before its runtime dir: another avfs starting
	// meanwhile removes the runtime dirs of homes that are gone.
	home := filepath.Join(work, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	runDir, err := proxy.RuntimeDir(home, "")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)
	avfs := func(args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home, "AVFS_VAULT=", "AVFS_PROXY_LINGER=")
		cmd.Env = append(cmd.Env, npmEnv...)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("avfs %v: %v: %.500s%.500s", args, err, out, ee.Stderr)
		}
		return out, err
	}
	// lingering runs leave their mount for the next run (--linger's
	// default); the others unmount at the end of the run.
	runAs := func(tr string, lingering bool, script string) (transportEnvelope, error) {
		var e transportEnvelope
		args := []string{"proxy", "exec", "--json", "--isolate", "off", "--checkpoint", "never", "--transport", tr}
		if !lingering {
			args = append(args, "--linger", "0")
		}
		out, err := avfs(append(args, "--shell", script)...)
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
	run := func(tr, script string) (transportEnvelope, error) { return runAs(tr, false, script) }

	type workload struct {
		name, setup, script, target string
		// imported is a host dir the workload starts from, imported into
		// the vault and copied on the native disk as /<its base name>
		// (not into /, which would make it the vault's origin).
		imported string
		// warm adds a row of consecutive lingering runs (warmRow).
		warm bool
	}
	gitSetup := `git init -q r && cd r && git config user.email b@b && git config user.name b &&
for d in $(seq 20); do mkdir d$d; for f in $(seq 100); do echo "line $d $f" > d$d/f$f; done; done &&
git add -A && git commit -qm init`
	gitRound := `cd r && git status --short >/dev/null && echo edit >> d1/f1 && git add -A && git commit -qm edit && git status --short >/dev/null`
	readSetup := `for d in $(seq 50); do mkdir t$d; for f in $(seq 100); do echo "content of $d $f" > t$d/f$f; done; done`
	loads := []workload{
		{name: "10,000 creates in 100 dirs", target: "1.5x",
			script: `for d in $(seq 100); do mkdir c$d; for f in $(seq 100); do : > c$d/f$f; done; done`},
		{name: "git round (2,000 files)", setup: gitSetup, script: gitRound, target: "1.5x", warm: true},
		{name: "read a 5,000-file tree", setup: readSetup, script: `find . \( -path ./r -o -path ./npm \) -prune -o -type f -exec cat {} + >/dev/null`, target: "1.2x", warm: true},
	}
	if npmErr == nil {
		loads = append(loads, workload{name: "npm install --offline", imported: filepath.Join(npmSrc, "npm"), script: npmInstall, target: "1.3x"})
	}
	if _, err := avfs("vault", "create", "tb", "--use"); err != nil {
		return err
	}
	// The native side works beside the overlay's upper dirs, in the
	// runtime dir: directories of one filesystem differ here (a create
	// under a crowded /tmp cost four times one under /run). Its root is
	// marked as the layer cache's is (chattr +T), and each rep's tree
	// gets a new name, so that it starts in a block group of its own:
	// ext4 without a journal scans past every inode freed in the last
	// minutes at each create, and would prefer the groups a removed tree
	// just freed: so no rep removes the last rep's tree (the runtime dir
	// goes, with all of them, when the section ends).
	nativeRoot := filepath.Join(runDir, "native")
	if err := os.MkdirAll(nativeRoot, 0o755); err != nil {
		return err
	}
	_ = exec.Command("chattr", "+T", nativeRoot).Run()
	nativeDir := filepath.Join(nativeRoot, "setup")
	if err := os.Mkdir(nativeDir, 0o755); err != nil {
		return err
	}
	for _, w := range loads {
		if w.imported != "" {
			if _, err := avfs("import", w.imported, "/"+filepath.Base(w.imported)); err != nil {
				return err
			}
			if err := exec.Command("cp", "-a", w.imported, nativeDir).Run(); err != nil {
				return err
			}
		}
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
	nativeBase := filepath.Join(nativeRoot, "base")
	if err := os.Rename(nativeDir, nativeBase); err != nil {
		return err
	}
	resets := 0
	resetNative := func() error {
		resets++
		nativeDir = filepath.Join(nativeRoot, fmt.Sprintf("rep%d", resets))
		return exec.Command("cp", "-a", nativeBase, nativeDir).Run()
	}
	// The first overlay run materializes the state; later ones stand on
	// the cache.
	first, err := run("overlay", "true")
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "\n== transports through proxy exec (median of %d alternating reps; ratio = (execute + summarize) / native, per rep) ==\n", reps)
	if o := first.Result.Overlay; o != nil {
		fmt.Fprintf(cfg.Out, "first overlay run materialized %v in %.1f ms (mount stage %.1f ms)\n", o.Materialized, o.MaterializeMs, first.Result.StageMs["mount"])
	}
	if npmErr != nil {
		fmt.Fprintf(cfg.Out, "npm install: skipped (%v)\n", npmErr)
	} else {
		fmt.Fprintf(cfg.Out, "npm install --offline installs %s, from its lockfile, npm's cache warmed\n", npmWhat)
	}
	fmt.Fprintf(cfg.Out, "%-30s %-10s %-26s %-26s %s\n", "workload", "native", "fuse (exec+sum, ratio)", "overlay (exec+sum, ratio)", "target")
	for _, w := range loads {
		// Each rep runs the work natively and on each transport, in an
		// order that rotates, and each transport's ratio is to the
		// native time of its own rep: a machine whose speed drifts
		// (shared, 40% here) drifts under all three alike.
		sides := []string{"native", "fuse", "overlay"}
		ds := map[string][]time.Duration{}
		ratios := map[string][]float64{}
		for rep := range reps {
			got := map[string]time.Duration{}
			for k := range sides {
				side := sides[(rep+k)%len(sides)]
				if side == "native" {
					// The copy of the base tree is not timed: only the work.
					if err := resetNative(); err != nil {
						return err
					}
					// The copy's writeback would otherwise slow the work timed.
					if err := exec.Command("sync").Run(); err != nil {
						return err
					}
					start := time.Now()
					if err := shEnv(nativeDir, npmEnv, w.script); err != nil {
						return err
					}
					got[side] = time.Since(start)
					continue
				}
				if _, err := avfs("checkpoint", "restore", "base"); err != nil {
					return err
				}
				e, err := run(side, w.script)
				if err != nil {
					return err
				}
				got[side] = time.Duration((e.Result.StageMs["execute"] + e.Result.StageMs["summarize"]) * 1e6)
			}
			for _, side := range sides {
				ds[side] = append(ds[side], got[side])
				ratios[side] = append(ratios[side], float64(got[side])/float64(got["native"]))
			}
		}
		nat := medianOf(ds["native"])
		cell := map[string]string{}
		for _, tr := range sides[1:] {
			r := ratios[tr]
			slices.Sort(r)
			cell[tr] = fmt.Sprintf("%s %.2fx (%.2f-%.2f)", ms(medianOf(ds[tr])), r[len(r)/2], r[0], r[len(r)-1])
		}
		fmt.Fprintf(cfg.Out, "%-30s %-10s %-26s %-26s ≤ %s\n", w.name, ms(nat), cell["fuse"], cell["overlay"], w.target)
	}
	for _, w := range loads {
		if w.warm {
			if err := warmRow(cfg, reps, w.name, w.target, w.script, func() string { return nativeDir }, npmEnv, resetNative, avfs, runAs); err != nil {
				return err
			}
		}
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
