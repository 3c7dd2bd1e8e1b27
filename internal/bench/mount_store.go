package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// MountStore measures the mount's read-tree and git round on a vault in
// the PostgreSQL store at dsn beside a vault in a SQLite file and the
// native disk, in the same run: the workloads of Mount, through real
// FUSE mounts served by their own avfs processes.
func MountStore(cfg Config, dsn string) (err error) {
	bin, err := avfsBinary()
	if err != nil {
		return err
	}
	reps := max(cfg.Reps, 1)
	work, err := os.MkdirTemp(cfg.Dir, "mountstore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	native := filepath.Join(work, "native")
	if err := os.MkdirAll(native, 0o755); err != nil {
		return err
	}
	roots := []string{native}
	for _, side := range []struct{ name, store string }{{"sqlite", ""}, {"postgres", dsn}} {
		home, mnt := filepath.Join(work, "home-"+side.name), filepath.Join(work, "mnt-"+side.name)
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return err
		}
		env := append(os.Environ(), "AVFS_HOME="+home, "AVFS_STORE="+side.store)
		avfs := func(args ...string) ([]byte, error) {
			c := exec.Command(bin, args...)
			c.Env = env
			out, err := c.Output()
			if err != nil {
				return out, fmt.Errorf("avfs %s (%s): %w", strings.Join(args, " "), side.name, err)
			}
			return out, nil
		}
		if _, err := avfs("vault", "create", "bench"); err != nil {
			return err
		}
		out, err := avfs("mount", "bench", mnt, "--json")
		if err != nil {
			return err
		}
		var m struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(out, &m); err != nil {
			return fmt.Errorf("avfs mount printed %q: %w", out, err)
		}
		defer func() {
			if _, uerr := avfs("unmount", mnt); err == nil {
				err = uerr
			}
		}()
		roots = append(roots, mnt)
	}

	w := cfg.Out
	fmt.Fprintf(w, "\n== mount, engine postgres: a vault in a store over a Unix socket beside one in a SQLite file (median of %d, same run) ==\n", reps)
	ratio := func(name string, fn func(root string) error) error {
		ds := make([][]time.Duration, len(roots))
		for r := range reps {
			for k := range roots {
				i := (r + k) % len(roots) // rotate who goes first
				for _, mnt := range roots[1:] {
					if err := settle(mnt); err != nil {
						return err
					}
				}
				start := time.Now()
				if err := fn(roots[i]); err != nil {
					return fmt.Errorf("%s in %s: %w", name, roots[i], err)
				}
				ds[i] = append(ds[i], time.Since(start))
			}
		}
		d := make([]time.Duration, len(ds))
		for i := range ds {
			slices.Sort(ds[i])
			d[i] = ds[i][len(ds[i])/2]
		}
		fmt.Fprintf(w, "  %-34s native %10s  sqlite %10s %5.2f×  postgres %10s %5.2f×\n", name,
			ms(d[0]), ms(d[1]), float64(d[1])/float64(d[0]), ms(d[2]), float64(d[2])/float64(d[0]))
		return nil
	}

	for _, root := range roots {
		if err := makeTree(filepath.Join(root, "src"), 50, 100, 4096); err != nil {
			return err
		}
		if err := sh(root, "find src -type f -exec cat {} + >/dev/null"); err != nil {
			return err
		}
	}
	if err := ratio("read tree (cat all + grep -r)", func(root string) error {
		return sh(root, "find src -type f -exec cat {} + >/dev/null; grep -rq no-such-text src || true")
	}); err != nil {
		return err
	}
	for _, root := range roots {
		repo := filepath.Join(root, "repo")
		if err := makeTree(repo, 40, 50, 2048); err != nil {
			return err
		}
		if err := sh(repo, "git init -q -b main && git add -A && git -c user.email=b@b -c user.name=b commit -qm base && git branch other"); err != nil {
			return err
		}
	}
	round := 0
	return ratio("git status/add/commit/checkout", func(root string) error {
		round++
		return sh(filepath.Join(root, "repo"), fmt.Sprintf(`set -e
for i in $(seq 1 50); do echo %d >> d$((i %% 40))/f$i; done
git status --porcelain >/dev/null
git add -A && git -c user.email=b@b -c user.name=b commit -qm r%d
git checkout -q other && git status --porcelain >/dev/null && git checkout -q main`, round, round))
	})
}
