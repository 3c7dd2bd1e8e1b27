// Package scripts_test runs the repository's scripts.
package scripts_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRelease runs release.sh for darwin/arm64, so that
// darwin keeps compiling, and checks SHA256SUMS against the files it names
// (the binaries, then the npm and Python packages) and the version stamped
// into the binaries. It compiles everything for another
// platform: a minute or more with a cold build cache, seconds with a warm
// one; -short skips it.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles avfs")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dist := t.TempDir()
	targets := []string{"darwin/arm64"} // the other platform family; linux is built by every test run
	const version = "v9.8.7-test"
	cmd := exec.Command("bash", "release.sh", version)
	cmd.Env = append(os.Environ(), "DIST="+dist, "TARGETS="+strings.Join(targets, " "))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}

	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	// Every line names a file of dist and its hash: the binaries first,
	// then the npm and Python packages built from the tree.
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not SUM  NAME", line)
		}
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS: %s has another hash", name)
		}
		names = append(names, name)
	}
	for _, prefix := range []string{"npm/agentvfs-cli-", "npm/agentvfs-cli-darwin-arm64-", "python/agentvfs_cli-", "python/agentvfs-cli-"} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			t.Errorf("SHA256SUMS names no %s* package:\n%s", prefix, sums)
		}
	}
	for i, target := range targets {
		goos, goarch, _ := strings.Cut(target, "/")
		name := "avfs-" + goos + "-" + goarch
		if names[i] != name {
			t.Errorf("SHA256SUMS line %d names %q, want the binary %q", i+1, names[i], name)
		}
		path := filepath.Join(dist, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The build settings recorded in the binary (with -trimpath the
		// linker flags are left out: the version is looked for below).
		out, err := exec.Command("go", "version", "-m", path).Output()
		if err != nil {
			t.Fatal(err)
		}
		info := string(out)
		for _, want := range []string{"GOOS=" + goos, "GOARCH=" + goarch, "CGO_ENABLED=0", "-trimpath=true"} {
			if !strings.Contains(info, want) {
				t.Errorf("%s: build info lacks %s:\n%s", name, want, info)
			}
		}
		if !bytes.Contains(b, []byte(version)) {
			t.Errorf("%s does not hold the version %s", name, version)
		}
	}
}
