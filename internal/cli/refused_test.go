package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// cancellingReader gives n bytes, cancels, then gives more: an input
// interrupted half-way by Ctrl-C.
type cancellingReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
	}
	m, err := c.r.Read(p[:min(len(p), max(c.n, 1))])
	c.n -= m
	return m, err
}

// A streamed write interrupted half-way changes nothing: the stage it had
// written goes, the file keeps its content, and fsck finds no trace.
func TestInterruptedWriteChangesNothing(t *testing.T) {
	r := newRunner(t)
	r.ok("vault", "create", "i", "--use")
	r.ok("write", "/f", "old")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	src := &cancellingReader{r: bytes.NewReader(make([]byte, 5<<20)), n: 3 << 20, cancel: cancel}
	code := Run(ctx, []string{"write", "/f", "--json"}, Env{
		Stdin: src, Stdout: &out, Stderr: &errOut,
		Getenv:     func(k string) string { return r.env[k] },
		IsTerminal: func(any) bool { return false },
	})
	if code == 0 {
		t.Fatalf("the interrupted write succeeded: %s", out.String())
	}
	if got := r.ok("cat", "/f"); got != "old" {
		t.Fatalf("/f after the interrupted write holds %d bytes", len(got))
	}
	if got := r.ok("fsck", "--json"); !strings.Contains(got, `"ok": true`) {
		t.Fatalf("fsck: %s", got)
	}
	if got := r.ok("quota", "--json"); !strings.Contains(got, `"bytes": 3,`) || !strings.Contains(got, `"files": 1`) {
		t.Fatalf("the stage left usage behind: %s", got)
	}
}

// A content argument longer than one step (possible in-process, where no
// exec limit applies) is staged like standard input: refused, it changes
// nothing.
func TestRefusedArgumentChangesNothing(t *testing.T) {
	r := newRunner(t)
	r.ok("vault", "create", "a", "--use")
	r.ok("write", "/f", "old")
	r.ok("quota", "set", "max_file_size_mb", "2")
	code, out, _ := r.run("", "write", "/f", strings.Repeat("x", 3<<20), "--json")
	if code != 7 || !strings.Contains(out, `"quota": "max_file_size_mb"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, args := range [][]string{{"write", "/f"}, {"write", "/f", "--append"}, {"write", "/new"}} {
		code, _, _ := r.run("", append(args, strings.Repeat("y", 3<<20))...)
		if code != 7 {
			t.Fatalf("%v: exit %d, want 7", args, code)
		}
	}
	if got := r.ok("cat", "/f"); got != "old" {
		t.Fatalf("/f holds %d bytes after the refused writes", len(got))
	}
	if code, _, _ := r.run("", "cat", "/new"); code == 0 {
		t.Fatal("the refused write made /new")
	}
}
