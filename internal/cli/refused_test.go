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
