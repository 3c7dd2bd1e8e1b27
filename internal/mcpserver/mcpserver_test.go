package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/cli"
	"github.com/agentvfs/agentvfs/internal/mcpserver"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestMain lets the test binary stand in for avfs: the server under test
// is a real `avfs mcp` process the Go SDK's client starts and speaks to
// over stdio, and the mounts its runs start are served by this binary too.
func TestMain(m *testing.M) {
	if os.Getenv("AVFS_MCP_TEST_AS_AVFS") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv("AVFS_MCP_TEST_AS_AVFS", "1") // for the children only
	os.Exit(m.Run())
}

// home is one avfs home with a vault "v", current.
func newHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if code, out, errOut := avfs(t, home, "vault", "create", "v", "--use"); code != 0 {
		t.Fatalf("vault create: %d %s %s", code, out, errOut)
	}
	return home
}

func avfs(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			return map[string]string{"AVFS_HOME": home, "AVFS_PROXY_LINGER": "0"}[k]
		}})
	return code, out.String(), errOut.String()
}

func avfsCmd(home string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "AVFS_HOME="+home, "AVFS_PROXY_LINGER=0")
	return cmd
}

// session is a client connected to `avfs mcp ARGS...` over stdio.
type session struct {
	t  *testing.T
	cs *mcp.ClientSession
	mu sync.Mutex
	// progress holds the progress notifications received.
	progress []*mcp.ProgressNotificationParams
}

func connect(t *testing.T, home string, args ...string) *session {
	t.Helper()
	s := &session{t: t}
	client := mcp.NewClient(&mcp.Implementation{Name: "avfs-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.mu.Lock()
			s.progress = append(s.progress, r.Params)
			s.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: avfsCmd(home, append([]string{"mcp"}, args...)...)}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	s.cs = cs
	t.Cleanup(func() { cs.Close() })
	return s
}

func (s *session) call(name string, args any, progressToken any) *mcp.CallToolResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := s.cs.CallTool(ctx, p)
	if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured content.
func (s *session) ok(name string, args any, out any) {
	s.t.Helper()
	res := s.call(name, args, nil)
	if res.IsError {
		s.t.Fatalf("%s(%v): tool error %s", name, args, text(res))
	}
	decode(s.t, res, out)
}

func decode(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("structured content %s: %v", b, err)
		}
	}
}

// fails calls a tool that must fail and returns its error document.
func (s *session) fails(name string, args any) map[string]any {
	s.t.Helper()
	res := s.call(name, args, nil)
	if !res.IsError {
		s.t.Fatalf("%s(%v) succeeded: %s", name, args, text(res))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(text(res)), &doc); err != nil {
		s.t.Fatalf("%s: the error is not a JSON document: %q", name, text(res))
	}
	if doc["error"] == nil || doc["message"] == nil || doc["exit_code"] == nil {
		s.t.Fatalf("%s: error document without error, message and exit_code: %v", name, doc)
	}
	return doc
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func (s *session) toolNames() []string {
	s.t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names
}

func TestToolsAndAnnotations(t *testing.T) {
	t.Parallel()
	s := connect(t, newHome(t))
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	for _, n := range mcpserver.ToolNames() {
		tl := byName[n]
		if tl == nil {
			t.Errorf("tool %s is not offered", n)
			continue
		}
		if tl.InputSchema == nil || tl.OutputSchema == nil || tl.Annotations == nil || tl.Description == "" {
			t.Errorf("tool %s lacks a schema, annotations or a description: %+v", n, tl)
		}
	}
	if len(res.Tools) != 18 {
		t.Errorf("%d tools, want 18", len(res.Tools))
	}
	for _, c := range []struct {
		name                  string
		readOnly, destructive bool
	}{{"file_read", true, false}, {"vault_list", true, false}, {"file_search", true, false},
		{"exec", false, true}, {"file_delete", false, true}, {"checkpoint_save", false, false}} {
		a := byName[c.name].Annotations
		if a.ReadOnlyHint != c.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != c.destructive {
			t.Errorf("%s: annotations %+v", c.name, a)
		}
	}
	b, _ := json.Marshal(byName["exec"].InputSchema)
	for _, field := range []string{`"argv"`, `"shell"`, `"approval"`, `"timeout"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("exec's input schema has no %s: %s", field, b)
		}
	}
}

func TestVaultsAndCheckpoints(t *testing.T) {
	t.Parallel()
	s := connect(t, newHome(t))
	var info struct {
		Name, Backend string
		Current       bool
	}
	s.ok("vault_create", map[string]any{"name": "w", "backend": "bolt"}, &info)
	if info.Name != "w" || info.Backend != "bolt" || info.Current {
		t.Errorf("vault_create: %+v", info)
	}
	var list struct{ Vaults []struct{ Name string } }
	s.ok("vault_list", map[string]any{}, &list)
	if len(list.Vaults) != 2 || list.Vaults[0].Name != "v" || list.Vaults[1].Name != "w" {
		t.Errorf("vault_list: %+v", list)
	}
	s.ok("file_write", map[string]any{"path": "/a.txt", "content": "one\n"}, nil)
	var cp struct{ Vault, Name string }
	s.ok("checkpoint_save", map[string]any{"name": "c1", "message": "first"}, &cp)
	if cp.Vault != "v" || cp.Name != "c1" {
		t.Errorf("checkpoint_save: %+v", cp)
	}
	s.ok("file_write", map[string]any{"path": "/b.txt", "content": "two\n"}, nil)
	var d struct {
		From, To string
		Changes  []struct{ Path, Kind string }
		Summary  map[string]int
	}
	s.ok("diff", map[string]any{}, &d)
	if d.From != "c1" || len(d.Changes) != 1 || d.Changes[0].Path != "/b.txt" || d.Changes[0].Kind != "added" || d.Summary["added"] != 1 {
		t.Errorf("diff: %+v", d)
	}
	var fork struct{ Name, Parent string }
	s.ok("vault_fork", map[string]any{"source": "v", "name": "f"}, &fork)
	if fork.Name != "f" || fork.Parent != "v" {
		t.Errorf("vault_fork: %+v", fork)
	}
	var got struct{ Content string }
	s.ok("file_read", map[string]any{"vault": "f", "path": "/b.txt"}, &got)
	if got.Content != "two\n" {
		t.Errorf("the fork reads %q", got.Content)
	}
	s.ok("checkpoint_restore", map[string]any{"name": "c1"}, nil)
	if doc := s.fails("file_read", map[string]any{"path": "/b.txt"}); doc["error"] != "NotFound" {
		t.Errorf("after restore: %v", doc)
	}
	var cps struct {
		Checkpoints []struct{ Name, Message string }
	}
	s.ok("checkpoint_list", map[string]any{}, &cps)
	if len(cps.Checkpoints) != 1 || cps.Checkpoints[0].Message != "first" {
		t.Errorf("checkpoint_list: %+v", cps)
	}
	if doc := s.fails("checkpoint_restore", map[string]any{"name": "nope"}); doc["error"] != "CheckpointNotFound" || doc["exit_code"] != 3.0 {
		t.Errorf("restore of a missing checkpoint: %v", doc)
	}
	if doc := s.fails("vault_create", map[string]any{"name": "v"}); doc["error"] != "VaultExists" || doc["exit_code"] != 4.0 {
		t.Errorf("vault_create of a name in use: %v", doc)
	}
}

// diff with patch and stat returns the text avfs diff prints, renames
// included, and without them no patch at all.
func TestDiffPatch(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	s := connect(t, home)
	s.ok("file_write", map[string]any{"path": "/a.txt", "content": "one\ntwo\nthree\n"}, nil)
	s.ok("file_write", map[string]any{"path": "/old.txt", "content": "moved as it is\n"}, nil)
	s.ok("checkpoint_save", map[string]any{"name": "c1"}, nil)
	s.ok("file_write", map[string]any{"path": "/a.txt", "content": "one\n2\nthree\n"}, nil)
	if code, out, errOut := avfs(t, home, "mv", "/old.txt", "/new.txt"); code != 0 {
		t.Fatal(out, errOut)
	}
	var d struct {
		Changes []struct{ Path, Kind, From string }
		Summary map[string]int
		Patch   string
		Stat    string
	}
	s.ok("diff", map[string]any{"from": "c1", "patch": true, "stat": true}, &d)
	_, patch, _ := avfs(t, home, "diff", "c1", "@", "--patch")
	_, stat, _ := avfs(t, home, "diff", "c1", "@", "--stat")
	if d.Patch != patch || !strings.Contains(patch, "rename from old.txt\nrename to new.txt\n") || !strings.Contains(patch, "+2\n") {
		t.Errorf("diff's patch:\n%s\navfs diff --patch:\n%s", d.Patch, patch)
	}
	if d.Stat != stat || !strings.Contains(stat, "old.txt => new.txt | 0") {
		t.Errorf("diff's stat:\n%s\navfs diff --stat:\n%s", d.Stat, stat)
	}
	if len(d.Changes) != 2 || d.Changes[1].Kind != "renamed" || d.Changes[1].From != "/old.txt" || d.Summary["renamed"] != 1 {
		t.Errorf("diff's changes: %+v %v", d.Changes, d.Summary)
	}
	var plain map[string]any
	s.ok("diff", map[string]any{"from": "c1"}, &plain)
	if _, ok := plain["patch"]; ok {
		t.Errorf("a diff without patch: true has a patch: %v", plain)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	s := connect(t, newHome(t))
	var w struct {
		Path    string
		Size    int
		Created bool
	}
	s.ok("file_write", map[string]any{"path": "src/main.go", "content": "package main\n\nfunc main() {}\n// main\n", "create_dirs": true}, &w)
	if w.Path != "/src/main.go" || !w.Created || w.Size != 37 {
		t.Errorf("file_write: %+v", w)
	}
	var r struct {
		Content, Encoding string
		Truncated         bool
		Size              int
	}
	s.ok("file_read", map[string]any{"path": "/src/main.go", "head": 1}, &r)
	if r.Content != "package main\n" || !r.Truncated || r.Encoding != "utf-8" || r.Size != 37 {
		t.Errorf("head: %+v", r)
	}
	s.ok("file_read", map[string]any{"path": "/src/main.go", "tail": 2}, &r)
	if r.Content != "func main() {}\n// main\n" {
		t.Errorf("tail: %+v", r)
	}
	bin := []byte{0, 1, 2, 0xff, 'x'}
	s.ok("file_write", map[string]any{"path": "/bin.dat", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"}, nil)
	s.ok("file_read", map[string]any{"path": "/bin.dat"}, &r)
	if r.Encoding != "base64" || r.Content != base64.StdEncoding.EncodeToString(bin) {
		t.Errorf("binary read: %+v", r)
	}

	// An edit whose text occurs twice changes nothing; a dry run neither.
	doc := s.fails("file_edit", map[string]any{"path": "/src/main.go", "edits": []map[string]any{{"old_text": "main", "new_text": "x"}}})
	if doc["error"] != "InvalidInput" || !strings.Contains(doc["message"].(string), "occurs 3 times") {
		t.Errorf("ambiguous edit: %v", doc)
	}
	var e struct {
		DryRun       bool `json:"dry_run"`
		Replacements []int
		Content      *string
	}
	s.ok("file_edit", map[string]any{"path": "/src/main.go", "dry_run": true,
		"edits": []map[string]any{{"old_text": "func main() {}", "new_text": "func main() { println(1) }"}}}, &e)
	if !e.DryRun || len(e.Replacements) != 1 || e.Content == nil || !strings.Contains(*e.Content, "println(1)") {
		t.Errorf("dry run: %+v", e)
	}
	s.ok("file_read", map[string]any{"path": "/src/main.go"}, &r)
	if strings.Contains(r.Content, "println") {
		t.Errorf("a dry run wrote: %q", r.Content)
	}
	s.ok("file_edit", map[string]any{"path": "/src/main.go",
		"edits": []map[string]any{{"old_text": "func main() {}", "new_text": "func main() { println(1) }"}, {"old_text": "main", "new_text": "MAIN", "replace_all": true}}}, &e)
	s.ok("file_read", map[string]any{"path": "/src/main.go"}, &r)
	if r.Content != "package MAIN\n\nfunc MAIN() { println(1) }\n// MAIN\n" || e.Replacements[1] != 3 {
		t.Errorf("edited: %q %+v", r.Content, e)
	}

	var l struct {
		Entries []struct{ Path, Type, Mode string }
	}
	s.ok("file_list", map[string]any{"recursive": true}, &l)
	var paths []string
	for _, en := range l.Entries {
		paths = append(paths, en.Path)
	}
	if !slices.Equal(paths, []string{"/bin.dat", "/src", "/src/main.go"}) {
		t.Errorf("file_list: %v", paths)
	}
	var st struct {
		Type string
		Size int
		Mode string
	}
	s.ok("file_stat", map[string]any{"path": "/src"}, &st)
	if st.Type != "dir" || st.Mode != "0755" {
		t.Errorf("file_stat: %+v", st)
	}
	var sr struct {
		Matches []struct {
			Path, Text string
			Line       int
		}
		Truncated bool
	}
	s.ok("file_search", map[string]any{"pattern": "println\\(\\d\\)"}, &sr)
	if len(sr.Matches) != 1 || sr.Matches[0].Path != "/src/main.go" || sr.Matches[0].Line != 3 || sr.Truncated {
		t.Errorf("file_search: %+v", sr)
	}
	s.ok("file_search", map[string]any{"pattern": "main", "ignore_case": true, "max_results": 2}, &sr)
	if len(sr.Matches) != 2 || !sr.Truncated {
		t.Errorf("file_search with max_results: %+v", sr)
	}
	var mv struct{ From, To string }
	s.ok("file_move", map[string]any{"from": "/bin.dat", "to": "/src"}, &mv)
	if mv.To != "/src/bin.dat" {
		t.Errorf("file_move: %+v", mv)
	}
	if doc := s.fails("file_delete", map[string]any{"path": "/src"}); doc["error"] != "NotAFile" {
		t.Errorf("delete of a directory without recursive: %v", doc)
	}
	var rm struct {
		Existed bool
		Removed int
	}
	s.ok("file_delete", map[string]any{"path": "/src", "recursive": true}, &rm)
	if !rm.Existed || rm.Removed != 3 {
		t.Errorf("file_delete: %+v", rm)
	}
	doc = s.fails("file_read", map[string]any{"path": "/src/main.go"})
	if doc["error"] != "NotFound" || doc["exit_code"] != 3.0 || doc["path"] != "/src/main.go" {
		t.Errorf("read of a deleted file: %v", doc)
	}
	if doc := s.fails("file_read", map[string]any{"vault": "nope", "path": "/x"}); doc["error"] != "VaultNotFound" {
		t.Errorf("read in a missing vault: %v", doc)
	}
	// Arguments the schema refuses are refused before the tool runs, with
	// an error document all the same.
	for _, args := range []map[string]any{{}, {"path": 7}, {"path": "/x", "head": "ten"}} {
		if doc := s.fails("file_read", args); doc["error"] != "InvalidInput" || doc["exit_code"] != 5.0 {
			t.Errorf("file_read(%v): %v", args, doc)
		}
	}
}

func TestReadonlyToolsAndPinnedVault(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	if code, out, errOut := avfs(t, home, "vault", "create", "other"); code != 0 {
		t.Fatal(out, errOut)
	}
	ro := connect(t, home, "--readonly")
	want := []string{"checkpoint_list", "diff", "file_list", "file_read", "file_search", "file_stat", "vault_list"} // listed by name
	if got := ro.toolNames(); !slices.Equal(got, want) {
		t.Errorf("--readonly offers %v, want %v", got, want)
	}
	if _, err := ro.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_write",
		Arguments: map[string]any{"path": "/x", "content": "x"}}); err == nil {
		t.Error("a read-only server ran file_write")
	}
	if code, out, _ := avfs(t, home, "--json", "ls", "/"); code != 0 || strings.Contains(out, `"x"`) {
		t.Errorf("after a refused write: %d %s", code, out)
	}

	some := connect(t, home, "--tools", "file_read,exec")
	if got := some.toolNames(); !slices.Equal(got, []string{"exec", "file_read"}) {
		t.Errorf("--tools offers %v", got)
	}
	if err := avfsCmd(home, "mcp", "--tools", "file_read,nope").Run(); err == nil {
		t.Error("--tools with an unknown tool started")
	}

	pin := connect(t, home, "--vault", "other")
	if got := pin.toolNames(); slices.Contains(got, "vault_create") || slices.Contains(got, "vault_fork") || !slices.Contains(got, "exec") {
		t.Errorf("a pinned server offers %v", got)
	}
	var list struct{ Vaults []struct{ Name string } }
	pin.ok("vault_list", map[string]any{}, &list)
	if len(list.Vaults) != 1 || list.Vaults[0].Name != "other" {
		t.Errorf("pinned vault_list: %+v", list)
	}
	pin.ok("file_write", map[string]any{"path": "/p.txt", "content": "p"}, nil)
	doc := pin.fails("file_read", map[string]any{"vault": "v", "path": "/p.txt"})
	if doc["error"] != "PermissionDenied" || doc["exit_code"] != 12.0 {
		t.Errorf("a pinned server read another vault: %v", doc)
	}
	if code, out, _ := avfs(t, home, "--vault", "other", "cat", "/p.txt"); code != 0 || out != "p" {
		t.Errorf("the pinned vault holds %d %q", code, out)
	}
}

func needsFuse(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
}

// checkNoMounts fails the test if a mount under home is left behind.
func checkNoMounts(t *testing.T, home string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], home) {
			t.Errorf("mount left behind: %s", f[4])
			avfs(t, home, "unmount", "--lazy", f[4])
		}
	}
}

type envelope struct {
	ID      string
	Success bool
	Result  struct {
		State    string
		ExitCode *int `json:"exit_code"`
		Stdout   string
		Changes  []struct{ Path, Kind string }
		Decision struct{ Action string }
		Approval *struct {
			ID, Status string
		}
		Checkpoint *struct{ Name string }
		Mountpoint *string
	}
}

func TestExecStreamsAndUndo(t *testing.T) {
	t.Parallel()
	needsFuse(t)
	home := newHome(t)
	t.Cleanup(func() { checkNoMounts(t, home) })
	s := connect(t, home)
	res := s.call("exec", map[string]any{"shell": "echo one; sleep 0.3; echo two > two.txt; echo three >&2"}, "tok-1")
	if res.IsError {
		t.Fatalf("exec: %s", text(res))
	}
	var env envelope
	decode(t, res, &env)
	if !env.Success || env.Result.State != "completed" || env.Result.Stdout != "one\n" || len(env.Result.Changes) != 1 ||
		env.Result.Changes[0].Path != "/two.txt" {
		t.Fatalf("envelope: %+v", env)
	}
	s.mu.Lock()
	var streamed = map[string]string{}
	last := 0.0
	for _, p := range s.progress {
		if p.ProgressToken != "tok-1" || p.Progress <= last {
			t.Errorf("progress notification %+v after %v", p, last)
		}
		last = p.Progress
		streamed[p.Meta["stream"].(string)] += p.Message
	}
	s.mu.Unlock()
	if streamed["stdout"] != "one\n" || streamed["stderr"] != "three\n" {
		t.Errorf("streamed %q", streamed)
	}
	var r struct{ Content string }
	s.ok("file_read", map[string]any{"path": "/two.txt"}, &r)
	if r.Content != "two\n" {
		t.Errorf("two.txt holds %q", r.Content)
	}
	var in envelope
	s.ok("exec", map[string]any{"argv": []string{"cat"}, "stdin": "from the agent", "checkpoint": "never"}, &in)
	if in.Result.Stdout != "from the agent" {
		t.Errorf("exec with stdin: %+v", in)
	}
	var sum struct {
		Result struct {
			Changes []any
			Summary *struct{ Added int } `json:"summary"`
		}
	}
	s.ok("exec", map[string]any{"shell": "echo 123 > s.txt", "checkpoint": "never", "changes": "summary"}, &sum)
	if sum.Result.Summary == nil || sum.Result.Summary.Added != 1 || len(sum.Result.Changes) != 0 {
		t.Errorf("exec with changes summary: %+v", sum)
	}
	if doc := s.fails("exec", map[string]any{"shell": "true", "changes": "all"}); doc["error"] != "InvalidInput" {
		t.Errorf("exec with changes all: %v", doc)
	}
	for _, bad := range []map[string]any{{"shell": "true", "timeout": "soon"}, {"shell": "true", "argv": []string{"true"}}, {}} {
		if doc := s.fails("exec", bad); doc["error"] != "InvalidInput" {
			t.Errorf("exec(%v): %v", bad, doc)
		}
	}
	var u struct {
		Run    string
		Undone []string
	}
	s.ok("undo", map[string]any{}, &u)
	if u.Run != env.ID {
		t.Errorf("undo: %+v", u)
	}
	if doc := s.fails("file_read", map[string]any{"path": "/two.txt"}); doc["error"] != "NotFound" {
		t.Errorf("after undo: %v", doc)
	}
	var rd struct{ Run string }
	s.ok("redo", map[string]any{}, &rd)
	if rd.Run != env.ID {
		t.Errorf("redo: %+v", rd)
	}
	s.ok("file_read", map[string]any{"path": "/two.txt"}, &r)
	if r.Content != "two\n" {
		t.Errorf("after redo two.txt holds %q", r.Content)
	}
	if doc := s.fails("redo", map[string]any{"run": env.ID}); doc["error"] != "Conflict" {
		t.Errorf("redo of a run not undone: %v", doc)
	}
}

func TestExecDeniedTouchesNothing(t *testing.T) {
	t.Parallel()
	needsFuse(t)
	home := newHome(t)
	t.Cleanup(func() { checkNoMounts(t, home) })
	s := connect(t, home)
	var env envelope
	s.ok("exec", map[string]any{"shell": "ls; cat /etc/passwd"}, &env)
	if env.Result.State != "denied" || env.Result.Decision.Action != "deny" || env.Result.ExitCode != nil ||
		env.Result.Checkpoint != nil || env.Result.Mountpoint != nil || env.Success {
		t.Fatalf("denied run: %+v", env)
	}
	var cps struct{ Checkpoints []any }
	s.ok("checkpoint_list", map[string]any{}, &cps)
	if len(cps.Checkpoints) != 0 {
		t.Errorf("a denied run left checkpoints %v", cps.Checkpoints)
	}
	if _, err := os.Stat(filepath.Join(home, "proxy", "mnt")); !os.IsNotExist(err) {
		t.Errorf("a denied run made a mountpoint: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "mounts")); len(ents) != 0 {
		t.Errorf("a denied run left mount records: %v", ents)
	}
}

func TestExecNeverApproves(t *testing.T) {
	t.Parallel()
	needsFuse(t)
	home := newHome(t)
	t.Cleanup(func() { checkNoMounts(t, home) })
	if err := os.WriteFile(filepath.Join(home, "policy.toml"),
		[]byte("version = 1\n[[rule]]\nname = \"ask\"\nprogram = [\"echo\"]\naction = \"require_approval\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := connect(t, home)
	var env envelope
	s.ok("exec", map[string]any{"argv": []string{"echo", "hi"}}, &env)
	if env.Result.State != "awaiting_approval" || env.Result.Approval == nil || env.Result.Approval.Status != "pending" || env.Result.ExitCode != nil {
		t.Fatalf("a run needing approval: %+v", env)
	}
	id := env.Result.Approval.ID
	// The id alone runs nothing: only a person's approve makes it count.
	doc := s.fails("exec", map[string]any{"approval": id})
	if doc["error"] != "ApprovalRequired" || doc["exit_code"] != 15.0 {
		t.Errorf("exec with an unapproved id: %v", doc)
	}
	if code, out, errOut := avfs(t, home, "proxy", "approve", id); code != 0 {
		t.Fatalf("approve: %d %s %s", code, out, errOut)
	}
	s.ok("exec", map[string]any{"approval": id}, &env)
	if !env.Success || env.Result.Stdout != "hi\n" {
		t.Errorf("the approved run: %+v", env)
	}
	if doc := s.fails("exec", map[string]any{"approval": id}); doc["error"] != "ApprovalUsed" {
		t.Errorf("an approval used twice: %v", doc)
	}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestHTTPNeedsTheToken(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	cmd := avfsCmd(home, "mcp", "--json", "--http", "127.0.0.1:0", "--readonly")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	var serving struct {
		URL       string `json:"url"`
		TokenFile string `json:"token_file"`
		Tools     []string
	}
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&serving); err != nil {
		t.Fatalf("avfs mcp --http printed no document: %v", err)
	}
	fi, err := os.Stat(serving.TokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 || serving.TokenFile != filepath.Join(home, "mcp", "token") {
		t.Fatalf("token file %s: %v %v", serving.TokenFile, fi, err)
	}
	tok, _ := os.ReadFile(serving.TokenFile)

	dial := func(token string) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "avfs-test", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: serving.URL,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	}
	if cs, err := dial("not-the-token"); err == nil {
		cs.Close()
		t.Fatal("a wrong token connected")
	}
	resp, err := http.Post(serving.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request without a token: %s", resp.Status)
	}
	cs, err := dial(strings.TrimSpace(string(tok)))
	if err != nil {
		t.Fatalf("the right token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "vault_list", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(text(res), `"name":"v"`) {
		t.Fatalf("vault_list over HTTP: %v %+v", err, res)
	}
}

func TestHTTPLoopbackOnly(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	code, out, _ := avfs(t, home, "--json", "mcp", "--http", "0.0.0.0:0")
	if code != 5 || !strings.Contains(out, `"InvalidInput"`) || !strings.Contains(out, "--listen") {
		t.Errorf("a non-loopback address without --listen: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, "mcp", "token")); !os.IsNotExist(err) {
		t.Errorf("a refused server made a token: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(home, "mcp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "mcp", "token"), []byte(strings.Repeat("a", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = avfs(t, home, "--json", "mcp", "--http", "127.0.0.1:0")
	if code != 12 || !strings.Contains(out, `"PermissionDenied"`) {
		t.Errorf("a token others may read: %d %s", code, out)
	}
}

// TestWritesBesideALingeringMount: a run's mount lingers for the next run;
// the file tools write beside it (it gives way) and the next run sees it.
func TestWritesBesideALingeringMount(t *testing.T) {
	t.Parallel()
	needsFuse(t)
	home := newHome(t)
	t.Cleanup(func() { checkNoMounts(t, home) })
	cmd := avfsCmd(home, "mcp")
	cmd.Env = append(cmd.Env, "AVFS_PROXY_LINGER=1m") // later entries win
	client := mcp.NewClient(&mcp.Implementation{Name: "avfs-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{t: t, cs: cs}
	t.Cleanup(func() { cs.Close() })
	var env envelope
	// FUSE: only a FUSE run's mount lingers (an overlay run ingests at its end).
	s.ok("exec", map[string]any{"shell": "echo one > one.txt", "transport": "fuse"}, &env)
	if !env.Success || env.Result.Mountpoint == nil {
		t.Fatalf("first run: %+v", env)
	}
	mnt := *env.Result.Mountpoint
	t.Cleanup(func() {
		if code, out, errOut := avfs(t, home, "unmount", mnt); code != 0 {
			t.Errorf("unmount %s: %s %s", mnt, out, errOut)
		}
	})
	s.ok("file_write", map[string]any{"path": "/two.txt", "content": "two\n"}, nil)
	s.ok("exec", map[string]any{"shell": "cat one.txt two.txt", "transport": "fuse"}, &env)
	if env.Result.Stdout != "one\ntwo\n" {
		t.Errorf("the second run reads %q", env.Result.Stdout)
	}
}

// A write the quota refuses changes nothing, and says so in its document.
func TestRefusedWriteChangesNothing(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	if code, out, errOut := avfs(t, home, "vault", "create", "q", "--max-file-size-mb", "1"); code != 0 {
		t.Fatal(out, errOut)
	}
	s := connect(t, home, "--vault", "q")
	s.ok("file_write", map[string]any{"path": "/keep.txt", "content": "kept"}, nil)
	big := strings.Repeat("x", 2<<20)
	for _, p := range []string{"/keep.txt", "/new.txt"} {
		if doc := s.fails("file_write", map[string]any{"path": p, "content": big}); doc["error"] != "QuotaExceeded" || doc["exit_code"] != 7.0 {
			t.Errorf("a write over the quota: %v", doc)
		}
	}
	var r struct{ Content string }
	s.ok("file_read", map[string]any{"path": "/keep.txt"}, &r)
	if r.Content != "kept" {
		t.Errorf("a refused write left %q", r.Content)
	}
	if doc := s.fails("file_stat", map[string]any{"path": "/new.txt"}); doc["error"] != "NotFound" {
		t.Errorf("a refused write made a file: %v", doc)
	}
	if doc := s.fails("file_edit", map[string]any{"path": "/keep.txt", "edits": []map[string]any{{"old_text": "kept", "new_text": big}}}); doc["error"] != "QuotaExceeded" {
		t.Errorf("an edit over the quota: %v", doc)
	}
	s.ok("file_read", map[string]any{"path": "/keep.txt"}, &r)
	if r.Content != "kept" {
		t.Errorf("a refused edit left %q", r.Content)
	}
}

// TestLargeWrite: file_write of content over one step (vfs.WriteFrom
// stages it across transactions, as the CLI's write) writes it whole; a
// large write refused from its third step on (over the file size quota,
// with create_dirs) changes nothing, not even a directory.
func TestLargeWrite(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	if code, out, errOut := avfs(t, home, "vault", "create", "q", "--max-file-size-mb", "2"); code != 0 {
		t.Fatal(out, errOut)
	}
	s := connect(t, home)
	big := strings.Repeat("0123456789abcdef", 5<<20/16)
	var w struct {
		Size    int64
		Created bool
	}
	s.ok("file_write", map[string]any{"vault": "v", "path": "/d/big", "content": big, "create_dirs": true}, &w)
	if w.Size != int64(len(big)) || !w.Created {
		t.Fatalf("file_write: %+v", w)
	}
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var b []byte
	if err := v.View(func(tx *vfs.Tx) (err error) { b, err = tx.ReadFile("/d/big"); return err }); err != nil || string(b) != big {
		t.Fatalf("read back %d bytes, %v", len(b), err)
	}
	three := big[:3<<20]
	if doc := s.fails("file_write", map[string]any{"vault": "q", "path": "/new/dir/f", "content": three, "create_dirs": true}); doc["error"] != "QuotaExceeded" {
		t.Errorf("a write over the quota: %v", doc["error"])
	}
	if doc := s.fails("file_stat", map[string]any{"vault": "q", "path": "/new"}); doc["error"] != "NotFound" {
		t.Errorf("a refused write left /new: %v", doc)
	}
}
