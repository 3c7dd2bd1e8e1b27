package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// gitTree is the workout's base tree as a git repository on the native
// disk, the baseline diff --patch and merge are measured beside: the same
// files, the same edits, git diff and git merge on them.
type gitTree struct {
	dir string
	n   int
}

// newGitTree writes the n files textPopulate writes and commits them on
// branch main; nil when git is not installed.
func newGitTree(dir string, n int) (*gitTree, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil
	}
	g := &gitTree{dir: dir, n: n}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return g, g.reset() // made by the workout of another engine
	}
	for i := range n {
		p := filepath.Join(dir, filepath.FromSlash(workoutPath(i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, workoutText(i, -1), 0o644); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}} {
		if err := g.git(io.Discard, args...); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *gitTree) git(out io.Writer, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@localhost",
		"-c", "commit.gpgsign=false", "-c", "core.quotepath=off"}, args...)...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %v: %v: %s", args, err, errOut.Bytes())
	}
	return nil
}

// reset brings the tree back to the base commit.
func (g *gitTree) reset() error {
	if err := g.git(io.Discard, "checkout", "-q", "-f", "main"); err != nil {
		return err
	}
	return g.git(io.Discard, "reset", "-q", "--hard", "main")
}

// measure makes the workout's k edits in the working tree and returns
// the median time of `git diff` (the patch, to a pipe) over reps, then
// commits them on a branch and returns the median time of merging it
// into main with a merge commit (`git merge --no-ff`, which writes the k
// files), main reset between runs.
func (g *gitTree) measure(k, reps int) (diff, merge time.Duration, err error) {
	if err := g.reset(); err != nil {
		return 0, 0, err
	}
	for j := range k {
		i := j * (g.n / k)
		if err := os.WriteFile(filepath.Join(g.dir, filepath.FromSlash(workoutPath(i))), workoutText(i, j%20, k), 0o644); err != nil {
			return 0, 0, err
		}
	}
	var patch countWriter
	diff, err = median(reps, func() error {
		patch = 0
		return g.git(&patch, "diff")
	})
	if err != nil {
		return 0, 0, err
	}
	if patch == 0 {
		return 0, 0, fmt.Errorf("workout: git diff printed nothing for %d changed files", k)
	}
	branch := fmt.Sprintf("task%d", k)
	for _, args := range [][]string{{"checkout", "-q", "-B", branch}, {"commit", "-q", "-a", "-m", branch}, {"checkout", "-q", "main"}} {
		if err := g.git(io.Discard, args...); err != nil {
			return 0, 0, err
		}
	}
	ds := make([]time.Duration, 0, reps)
	for range reps {
		start := time.Now()
		if err := g.git(io.Discard, "merge", "-q", "--no-ff", "--no-edit", branch); err != nil {
			return 0, 0, err
		}
		ds = append(ds, time.Since(start))
		if err := g.git(io.Discard, "reset", "-q", "--hard", "HEAD~1"); err != nil {
			return 0, 0, err
		}
	}
	return diff, medianOf(ds), g.reset()
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
