package cli

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProgressBar: a terminal gets a progress bar on stderr; --json and
// pipes get none.
func TestProgressBar(t *testing.T) {
	// Not parallel: it changes progressDelay, which parallel tests read.
	old := progressDelay
	progressDelay = 0
	defer func() { progressDelay = old }()

	r := newRunner(t)
	src := t.TempDir()
	for i := range 3 {
		writeRandom(t, filepath.Join(src, fmt.Sprintf("f%d", i)), 2<<20)
	}
	r.ok("vault", "create", "p", "--use")

	r.term = true
	code, stdout, stderr := r.run("", "import", src, "/a")
	if code != 0 || !strings.Contains(stderr, "import [") || !strings.Contains(stderr, "\r") {
		t.Errorf("import on a terminal: exit %d, want a progress bar on stderr; stderr %q", code, stderr)
	}
	if strings.Contains(stdout, "[") {
		t.Errorf("progress bar on stdout: %q", stdout)
	}
	code, _, stderr = r.run("", "export", "/a", filepath.Join(t.TempDir(), "out"))
	if code != 0 || !strings.Contains(stderr, "export [") {
		t.Errorf("export on a terminal: exit %d, want a progress bar; stderr %q", code, stderr)
	}
	code, _, stderr = r.run("", "import", src, "/b", "--json")
	if code != 0 || stderr != "" {
		t.Errorf("import --json on a terminal: exit %d, stderr %q, want none", code, stderr)
	}
	r.term = false
	code, _, stderr = r.run("", "import", src, "/c")
	if code != 0 || stderr != "" {
		t.Errorf("import to a pipe: exit %d, stderr %q, want none", code, stderr)
	}
}

// TestDeletePreview: without --yes on a terminal, delete says what would
// go and deletes nothing.
func TestDeletePreview(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	r.ok("vault", "create", "gone")
	r.ok("checkpoint", "save", "one", "--vault", "gone")
	r.term = true
	code, _, stderr := r.run("", "vault", "delete", "gone")
	if code != 13 || !strings.Contains(stderr, "would delete vault gone") || !strings.Contains(stderr, "checkpoints  1") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(r.home, "vaults", "gone.avfs")); err != nil {
		t.Errorf("vault deleted without --yes: %v", err)
	}
}

// TestStreamingMemory imports, cats and exports a file much larger than
// the step size in a separate process, and checks that the process never
// held the file in memory.
func TestStreamingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 64 MiB")
	}
	t.Parallel()
	// A copy of the whole file in memory would pass the bound. Under the
	// race detector a smaller file is enough, with room for its shadow
	// memory of the engine's page cache. The bound has room for the
	// garbage collection after an import too: it opens a read
	// connection, which an import alone does not (about 3 MiB, whatever
	// the file's size).
	size, bound := int64(64<<20), int64(28<<20)
	if raceEnabled {
		size, bound = 40<<20, 32<<20
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "big")
	writeRandom(t, src, int(size))
	env := append(os.Environ(), "AVFS_HOME="+filepath.Join(dir, "home"), "AVFS_VAULT=m")
	hwm := filepath.Join(dir, "hwm")
	env = append(env, "AVFS_TEST_HWM="+hwm)
	maxRSS := func(args ...string) int64 {
		t.Helper()
		cmd := exec.Command(os.Args[0])
		cmd.Args = append([]string{"avfs"}, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("avfs %v: %v\n%s", args, err, stderr.String())
		}
		b, err := os.ReadFile(hwm)
		if err != nil {
			t.Skipf("no peak memory reported (not Linux?): %v", err)
		}
		kib, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return kib << 10
	}
	maxRSS("vault", "create", "m")
	base := maxRSS("ls")
	for _, args := range [][]string{
		{"import", src, "/big"},
		{"cat", "/big"},
		{"export", "/big", filepath.Join(dir, "out")},
	} {
		rss := maxRSS(args...)
		t.Logf("avfs %v: rss %d MiB, base %d MiB", args, rss>>20, base>>20)
		if rss-base > bound {
			t.Errorf("avfs %v: peak RSS %d MiB above an idle run's %d MiB, for a %d MiB file",
				args, (rss-base)>>20, base>>20, size>>20)
		}
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(filepath.Join(dir, "out", "big"))
	if !bytes.Equal(a, b) {
		t.Errorf("the exported file differs from the imported one")
	}
}

// writeRandom writes size random bytes: data that neither compresses
// nor deduplicates.
func writeRandom(t *testing.T, path string, size int) {
	t.Helper()
	buf := make([]byte, size)
	crand.Read(buf)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInterrupted: a transfer stopped by a signal (a cancelled context)
// fails with Interrupted and exit code 130.
func TestInterrupted(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	r.ok("vault", "create", "i", "--use")
	src := t.TempDir()
	writeRandom(t, filepath.Join(src, "f"), 1<<10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	code := Run(ctx, []string{"import", src, "--json"}, Env{Stdout: &out, Stderr: io.Discard,
		Getenv: func(k string) string { return r.env[k] }})
	if code != 130 || !strings.Contains(out.String(), `"error": "Interrupted"`) {
		t.Errorf("exit %d, output %s", code, out.String())
	}
}

// TestMaterializingProgress: a first overlay run on a vault of thousands
// of files draws its materializing on a terminal's stderr, and clears the
// bar before the run's own lines (newProgress draws nothing with --json
// or off a terminal, TestProgressBar).
func TestMaterializingProgress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlay mounts need root")
	}
	// Not parallel: it changes progressDelay, which parallel tests read.
	old := progressDelay
	progressDelay = 0
	defer func() { progressDelay = old }()
	r := newRunner(t)
	r.env["XDG_RUNTIME_DIR"] = t.TempDir() // a layer cache of this test's own
	src := t.TempDir()
	for d := range 30 {
		dir := filepath.Join(src, fmt.Sprint("d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 200 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(f)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.ok("vault", "create", "a")
	r.ok("--vault", "a", "import", src, "/t")
	r.term = true
	code, stdout, stderr := r.run("", "--vault", "a", "proxy", "exec", "--isolate", "off", "--transport", "overlay", "--linger", "0", "--", "echo", "ran")
	const bar = "avfs: materializing the vault's layers ["
	last := strings.LastIndex(stderr, bar)
	if code != 0 || last < 0 || !strings.Contains(stderr[last:], "\x1b[K\r\x1b[Kavfs proxy: run") || stdout != "ran\n" {
		t.Errorf("first overlay run on a terminal: exit %d, stdout %q, stderr %q; want the bar drawn and cleared", code, stdout, stderr)
	}
}
