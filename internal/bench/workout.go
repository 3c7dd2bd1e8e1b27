package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// textPopulate fills a vault with n text files of 20 lines in 100
// directories.
func textPopulate(v *vfs.Vault, n int) error {
	const batch = 500
	for start := 0; start < n; start += batch {
		err := v.Update(func(tx *vfs.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				if _, err := tx.MkdirAll(fmt.Sprintf("/d%02d", i%100), 0o755); err != nil {
					return err
				}
				if _, err := tx.WriteFile(workoutPath(i), workoutText(i, -1), 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func workoutPath(i int) string { return fmt.Sprintf("/d%02d/f%06d.txt", i%100, i) }

// workoutText is file i's 20 lines, line edit changed by task when it is
// 0-19.
func workoutText(i, edit int, task ...int) []byte {
	var b strings.Builder
	for l := range 20 {
		if l == edit {
			fmt.Fprintf(&b, "edited line %d of file %d in task %v\n", l, i, task)
			continue
		}
		fmt.Fprintf(&b, "line %d of file %d: some text to diff\n", l, i)
	}
	return []byte(b.String())
}

// Workout measures getting a fork's work out of a vault of the largest
// size: the change list (checkpoint diff), diff --patch (with renames
// paired, as avfs diff does) and vault merge, for 1, 100 and 10,000
// changed files. The time to write the changes is printed beside them,
// and the baseline: git diff and git merge --no-ff of the same edits of
// the same files, in a git repository on the native disk.
func Workout(cfg Config, engine string) error {
	n := slices.Max(cfg.Counts)
	reps := min(cfg.Reps, 5)
	fmt.Fprintf(cfg.Out, "\n== diff --patch and merge, engine %s (%d text files; diffs: median of %d) ==\n", engine, n, reps)
	fmt.Fprintf(cfg.Out, "%-9s %-14s %-14s %-16s %-14s %-14s %-14s %-14s\n", "changed", "write them", "change list", "diff --patch", "merge dry-run", "merge", "git diff", "git merge")
	home, err := registry.Open(filepath.Join(cfg.Dir, "home-workout-"+engine))
	if err != nil {
		return err
	}
	base, err := home.Create("base", registry.CreateOptions{Engine: engine})
	if err != nil {
		return err
	}
	defer base.Close()
	if err := textPopulate(base, n); err != nil {
		return err
	}
	g, err := newGitTree(filepath.Join(cfg.Dir, "git-workout"), n)
	if err != nil {
		return err
	}
	syscall.Sync()
	for _, k := range []int{1, 100, 10000} {
		if k > n {
			continue
		}
		fork, err := home.Fork("base", fmt.Sprintf("task%d", k))
		if err != nil {
			return err
		}
		start := time.Now()
		for s := 0; s < k; s += 500 {
			err := fork.Update(func(tx *vfs.Tx) error {
				for j := s; j < min(s+500, k); j++ {
					i := j * (n / k)
					if _, err := tx.WriteFile(workoutPath(i), workoutText(i, j%20, k), 0o644); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		write := time.Since(start)
		from, to := vfs.StateRef{Vault: base}, vfs.StateRef{Vault: fork}
		var changes []vfs.Change
		list, err := median(reps, func() (err error) {
			changes, err = vfs.Diff(from, to)
			return err
		})
		if err != nil {
			return err
		}
		if len(changes) != k {
			return fmt.Errorf("workout: %d changes, want %d", len(changes), k)
		}
		patch, err := median(reps, func() error {
			_, _, err := vfs.ContentDiff(from, to, true)
			return err
		})
		if err != nil {
			return err
		}
		dry, err := median(reps, func() error {
			_, err := vfs.Merge(fork, base, vfs.ConflictFail, true)
			return err
		})
		if err != nil {
			return err
		}
		start = time.Now()
		res, err := vfs.Merge(fork, base, vfs.ConflictFail, false)
		if err != nil {
			return err
		}
		merge := time.Since(start)
		if !res.Merged || len(res.Applied) != k {
			return fmt.Errorf("workout: merge applied %d of %d", len(res.Applied), k)
		}
		fork.Close()
		gitDiff, gitMerge := "(no git)", "(no git)"
		if g != nil {
			d, m, err := g.measure(k, reps)
			if err != nil {
				return err
			}
			gitDiff, gitMerge = ms(d), ms(m)
		}
		fmt.Fprintf(cfg.Out, "%-9d %-14s %-14s %-16s %-14s %-14s %-14s %-14s\n", k, ms(write), ms(list), ms(patch), ms(dry), ms(merge), gitDiff, gitMerge)
	}
	return nil
}
