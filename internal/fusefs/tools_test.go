package fusefs_test

import (
	"os"
	"os/exec"
	"testing"
)

// The tool suites (git, go, npm, tar, python, sqlite3) run on every
// transport in package transport/toolsuite; the helpers here serve the
// mount tests that use tools.

// sh runs a shell script in dir with a clean, fixed environment and
// returns its output.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C",
		"GIT_AUTHOR_NAME=avfs", "GIT_AUTHOR_EMAIL=avfs@example.com",
		"GIT_COMMITTER_NAME=avfs", "GIT_COMMITTER_EMAIL=avfs@example.com",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s:\n%s\n%v\n%s", dir, script, err, out)
	}
	return string(out)
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}
