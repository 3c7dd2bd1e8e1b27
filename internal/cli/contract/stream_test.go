package contract_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/cli"
)

// TestStreamSchema runs proxy exec --stream and validates each line it
// prints against docs/schema/proxy-exec-stream.json: the output events
// as they came, then the result event last.
func TestStreamSchema(t *testing.T) {
	t.Parallel()
	if !canMount() {
		t.Skip("needs root and /dev/fuse")
	}
	schemas := loadSchemas(t)
	r := newRunner(t)
	r.env["AVFS_PROXY_LINGER"] = "0"
	if code, out, errOut := r.run("", "vault", "create", "s", "--use"); code != 0 {
		t.Fatal(out, errOut)
	}
	check := func(want int, args ...string) []map[string]any {
		t.Helper()
		code, out, errOut := r.run("", append([]string{"proxy", "exec", "--stream"}, args...)...)
		if code != want {
			t.Fatalf("proxy exec --stream %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		var events []map[string]any
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var doc any
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatalf("a line that is not JSON: %q", line)
			}
			if err := schemas["proxy-exec-stream"].Validate(doc); err != nil {
				t.Errorf("%s: %v", line, err)
			}
			events = append(events, doc.(map[string]any))
		}
		return events
	}
	events := check(3, "--shell", `echo one; printf '\377\n'; echo two >&2; sleep 0.2; echo three; exit 3`)
	var out, errOut string
	for _, e := range events[:len(events)-1] {
		switch e["event"] {
		case "stdout":
			if d, ok := e["data"].(string); ok {
				out += d
			} else {
				b, err := base64.StdEncoding.DecodeString(e["data_base64"].(string))
				if err != nil {
					t.Errorf("data_base64: %v", err)
				}
				out += string(b)
			}
		case "stderr":
			errOut += e["data"].(string)
		default:
			t.Errorf("an event before the last that is not output: %v", e)
		}
	}
	if out != "one\n\xff\nthree\n" || errOut != "two\n" {
		t.Errorf("streamed stdout %q, stderr %q", out, errOut)
	}
	last := events[len(events)-1]
	env, _ := last["envelope"].(map[string]any)
	if last["event"] != "result" || env == nil || env["result"].(map[string]any)["stdout"] != "one\n\ufffd\nthree\n" { // the envelope's JSON replaces what is not UTF-8
		t.Errorf("the last event: %v", last)
	}
	// A request refused before it runs ends the stream with an error event.
	events = check(3, "--vault", "nope", "--", "true")
	if len(events) != 1 || events[0]["event"] != "error" || events[0]["error"].(map[string]any)["error"] != "VaultNotFound" {
		t.Errorf("a refused request: %v", events)
	}
}

// timedWriter records when each write came.
type timedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	firsts map[string]time.Time // when a text was first seen
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, s := range []string{"one", "two", "avfs proxy: run"} {
		if _, ok := w.firsts[s]; !ok && strings.Contains(w.buf.String(), s) {
			w.firsts[s] = time.Now()
		}
	}
	return len(p), nil
}

// TestLiveOutputOnATerminal: without --json on a terminal, the command's
// output passes through while it runs, and a summary line ends on stderr.
func TestLiveOutputOnATerminal(t *testing.T) {
	t.Parallel()
	if !canMount() {
		t.Skip("needs root and /dev/fuse")
	}
	r := newRunner(t)
	r.env["AVFS_PROXY_LINGER"] = "0"
	if code, out, errOut := r.run("", "vault", "create", "s", "--use"); code != 0 {
		t.Fatal(out, errOut)
	}
	out := &timedWriter{firsts: map[string]time.Time{}}
	errOut := &timedWriter{firsts: map[string]time.Time{}}
	code := cli.Run(context.Background(), []string{"proxy", "exec", "--shell", "echo one; echo two >&2; sleep 1; echo done > f"}, cli.Env{
		Stdout: out, Stderr: errOut, Getenv: func(k string) string { return r.env[k] },
		IsTerminal: func(any) bool { return true },
	})
	ended := time.Now()
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.buf.String(), errOut.buf.String())
	}
	if out.buf.String() != "one\n" {
		t.Errorf("stdout %q, want the command's output alone", out.buf.String())
	}
	lines := strings.Split(strings.TrimSuffix(errOut.buf.String(), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "two" || !strings.Contains(lines[1], "exit 0") || !strings.Contains(lines[1], "1 changed file(s)") {
		t.Errorf("stderr %q, want the command's, then one summary line", errOut.buf.String())
	}
	for w, s := range map[*timedWriter]string{out: "one", errOut: "two"} {
		if at, ok := w.firsts[s]; !ok || ended.Sub(at) < 800*time.Millisecond {
			t.Errorf("%q came %v before the end of the run, not as it was printed", s, ended.Sub(at))
		}
	}
}

// TestMCPServingSchema starts `avfs mcp --http --json`, a real process,
// and validates the document it prints once it listens against
// docs/schema/mcp.json.
func TestMCPServingSchema(t *testing.T) {
	t.Parallel()
	schemas := loadSchemas(t)
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "mcp", "--json", "--http", "127.0.0.1:0", "--vault", "pinned", "--readonly")
	cmd.Env = append(os.Environ(), "AVFS_HOME="+home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var doc any
	if err := json.NewDecoder(stdout).Decode(&doc); err != nil {
		t.Fatalf("avfs mcp --http --json printed no document: %v", err)
	}
	if err := schemas["mcp"].Validate(doc); err != nil {
		t.Errorf("%v: %v", doc, err)
	}
	if m := doc.(map[string]any); m["vault"] != "pinned" || !strings.HasPrefix(m["url"].(string), "http://127.0.0.1:") {
		t.Errorf("serving document %v", m)
	}
}
