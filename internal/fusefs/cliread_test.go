package fusefs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/cli"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// avfsText runs the command line in-process with home as $AVFS_HOME and
// returns its exit code and its JSON output as text.
func avfsText(t *testing.T, home string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), append(args, "--json"), cli.Env{
		Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "AVFS_HOME" {
				return home
			}
			return ""
		},
	})
	return code, out.String() + errOut.String()
}

// TestCLIReadsBesideMount: every CLI command that reads or freezes the
// working state of a vault mounted read-write sees the files written and
// closed in the mount just before, though the mount's server still
// buffers them (write-back) and has not committed their names (batch):
// the CLI asks the mount to persist first (mountd.Persist).
func TestCLIReadsBesideMount(t *testing.T) {
	home, mnt, _ := cliMount(t)
	n := 0
	// fresh writes a new file in the mount and closes it, without fsync.
	fresh := func(dir string) (name, content string) {
		t.Helper()
		n++
		name = fmt.Sprintf("f%d", n)
		content = strings.Repeat(fmt.Sprintf("content of %s\n", name), 100*n)
		if dir != "" {
			if err := os.MkdirAll(filepath.Join(mnt, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			name = dir + "/" + name
		}
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return "/" + name, content
	}
	run := func(args ...string) string {
		t.Helper()
		code, out := avfsText(t, home, args...)
		if code != 0 {
			t.Errorf("avfs %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	wants := func(cmd, out string, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(out, p) {
				t.Errorf("%s does not show %q:\n%.600s", cmd, p, out)
			}
		}
	}

	p, c := fresh("")
	wants("cat", run("cat", p), fmt.Sprintf("%q", c)[:40])
	p, c = fresh("")
	wants("stat", run("stat", p), fmt.Sprintf(`"size": %d`, len(c)))
	p, c = fresh("")
	wants("ls", run("ls", "/"), fmt.Sprintf(`"name": %q`, p[1:]), fmt.Sprintf(`"size": %d`, len(c)))
	p, c = fresh("")
	wants("tree", run("tree", "/"), fmt.Sprintf(`"name": %q`, p[1:]), fmt.Sprintf(`"size": %d`, len(c)))
	p, c = fresh("exp")
	host := filepath.Join(t.TempDir(), "out")
	run("export", "/exp", host)
	if b, err := os.ReadFile(filepath.Join(host, filepath.Base(p))); err != nil || string(b) != c {
		t.Errorf("export: %d bytes, %v; want %d", len(b), err, len(c))
	}
	saved, savedContent := fresh("")
	run("checkpoint", "save", "cp1")
	p, c = fresh("")
	wants("checkpoint diff", run("checkpoint", "diff", "cp1"), fmt.Sprintf(`"path": %q`, p), fmt.Sprintf(`"size_after": %d`, len(c)))
	before := usageBytes(t, run("vault", "info"))
	_, c = fresh("")
	if after := usageBytes(t, run("vault", "info")); after < before+int64(len(c)) {
		t.Errorf("vault info: usage %d after writing %d bytes to %d", after, len(c), before)
	}
	forked, forkedContent := fresh("")
	run("vault", "fork", "v", "w")

	// What the checkpoint and the fork hold, read once the mount is gone.
	run("unmount", mnt)
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got := readState(t, v, "cp1", saved); got != savedContent {
		t.Errorf("checkpoint save captured %d bytes of %s, not %d", len(got), saved, len(savedContent))
	}
	w, err := h.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := readState(t, w, "", forked); got != forkedContent {
		t.Errorf("the fork holds %d bytes of %s, not %d", len(got), forked, len(forkedContent))
	}
}

// usageBytes is the usage in vault info's output.
func usageBytes(t *testing.T, out string) int64 {
	t.Helper()
	var n int64
	i := strings.Index(out, `"usage"`)
	if i < 0 {
		t.Fatalf("no usage in %s", out)
	}
	j := strings.Index(out[i:], `"bytes": `)
	if j < 0 {
		t.Fatalf("no usage bytes in %s", out)
	}
	fmt.Sscanf(out[i+j+len(`"bytes": `):], "%d", &n)
	return n
}

// readState reads p in checkpoint cp of v ("": the working state).
func readState(t *testing.T, v *vfs.Vault, cp, p string) string {
	t.Helper()
	if cp == "" {
		b, _ := vaultFile(t, v, p)
		return string(b)
	}
	var b []byte
	err := v.ViewAt(cp, func(tx *vfs.Tx) (err error) {
		b, err = tx.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatalf("read %s in %s: %v", p, cp, err)
	}
	return string(b)
}
