package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runner runs the command line in-process against one temporary home.
type runner struct {
	t    *testing.T
	home string
	env  map[string]string
	term bool // pretend every stream is a terminal
}

func newRunner(t *testing.T) *runner {
	home := t.TempDir()
	return &runner{t: t, home: home, env: map[string]string{"AVFS_HOME": home}}
}

// run runs avfs with args and stdin; it returns the exit code and output.
func (r *runner) run(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, Env{
		Stdin:      strings.NewReader(stdin),
		Stdout:     &out,
		Stderr:     &errOut,
		Getenv:     func(k string) string { return r.env[k] },
		IsTerminal: func(any) bool { return r.term },
	})
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed and returns its stdout.
func (r *runner) ok(args ...string) string {
	r.t.Helper()
	code, out, errOut := r.run("", args...)
	if code != 0 {
		r.t.Fatalf("avfs %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}
