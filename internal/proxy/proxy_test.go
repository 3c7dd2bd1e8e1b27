package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentvfs/agentvfs/internal/cli"
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/fsynctest"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/proxy"
)

// TestMain lets the test binary stand in for avfs when a run starts the
// mount's serving process (cli.MountExecutable is this binary).
func TestMain(m *testing.M) {
	if os.Getenv("AVFS_PROXY_TEST_AS_AVFS") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv("AVFS_PROXY_TEST_AS_AVFS", "1") // for the children only
	flag.Parse()
	code := pgtest.Main(m) // stops the PostgreSQL server a store test started
	removeBinary()
	os.Exit(code)
}

// env is one avfs home with a vault "v", run in-process. Runs unmount
// after themselves unless a test passes --linger or sets linger
// ($AVFS_PROXY_LINGER).
type env struct {
	t      *testing.T
	home   string
	linger string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
	e := &env{t: t, home: t.TempDir(), linger: "0"}
	t.Cleanup(func() {
		checkNoMounts(t, e.home)
		if d, err := proxy.RuntimeDir(e.home, ""); err == nil {
			_ = os.RemoveAll(d)
		}
	})
	if code, out, errOut := e.avfs("", "vault", "create", "v", "--use"); code != 0 {
		t.Fatalf("vault create: %d %s %s", code, out, errOut)
	}
	return e
}

// checkNoMounts fails the test if a mount under home or its runtime dir
// is left behind, and detaches it so that the next test is not affected.
func checkNoMounts(t *testing.T, home string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	runDir, err := proxy.RuntimeDir(home, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (strings.HasPrefix(f[4], home) || strings.HasPrefix(f[4], runDir)) {
			t.Errorf("mount left behind: %s", f[4])
			e := &env{t: t, home: home}
			e.avfs("", "unmount", "--lazy", f[4])
		}
	}
}

func (e *env) getenv(k string) string {
	return map[string]string{"AVFS_HOME": e.home, "AVFS_PROXY_LINGER": e.linger}[k]
}

func (e *env) avfs(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Getenv:     e.getenv,
		IsTerminal: func(any) bool { return false },
	})
	return code, out.String(), errOut.String()
}

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// validate checks an envelope against docs/schema/proxy-exec.json.
func validate(t *testing.T, out string) {
	t.Helper()
	schemaOnce.Do(func() {
		dir, _ := filepath.Abs("../../docs/schema")
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		for _, n := range []string{"common", "proxy-exec"} {
			b, err := os.ReadFile(filepath.Join(dir, n+".json"))
			if err != nil {
				schemaErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemaErr = err
				return
			}
			if schemaErr = c.AddResource("file://"+filepath.Join(dir, n+".json"), doc); schemaErr != nil {
				return
			}
		}
		schema, schemaErr = c.Compile("file://" + filepath.Join(dir, "proxy-exec.json"))
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("envelope does not follow proxy-exec.json: %v\n%s", err, out)
	}
}

// exec runs `avfs proxy exec ARGS...` and decodes the envelope.
func (e *env) exec(wantCode int, stdin string, args ...string) *proxy.Envelope {
	e.t.Helper()
	code, out, errOut := e.avfs(stdin, append([]string{"--json", "proxy", "exec"}, args...)...)
	if code != wantCode {
		e.t.Fatalf("proxy exec %v: exit %d, want %d\n%s%s", args, code, wantCode, out, errOut)
	}
	validate(e.t, out)
	var env proxy.Envelope
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return &env
}

func (e *env) checkpoints() []string {
	e.t.Helper()
	code, out, _ := e.avfs("", "--json", "checkpoint", "list")
	if code != 0 {
		e.t.Fatalf("checkpoint list: %s", out)
	}
	var r struct {
		Checkpoints []struct{ Name string } `json:"checkpoints"`
	}
	_ = json.Unmarshal([]byte(out), &r)
	var names []string
	for _, c := range r.Checkpoints {
		names = append(names, c.Name)
	}
	return names
}

func TestDenyTouchesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := e.exec(14, "", "--shell", "ls; cat /etc/passwd")
	r := env.Result
	if r.State != proxy.StateDenied || r.Decision.Action != "deny" || r.ExitCode != nil || r.Checkpoint != nil || r.Mountpoint != nil {
		t.Fatalf("denied run: %+v", r)
	}
	if r.StageMs[proxy.StateCheckpoint] != 0 || r.StageMs[proxy.StateMount] != 0 || r.StageMs[proxy.StateExecute] != 0 {
		t.Errorf("denied run spent time in later stages: %v", r.StageMs)
	}
	if cps := e.checkpoints(); len(cps) != 0 {
		t.Errorf("denied run left checkpoints %v", cps)
	}
	runDir, _ := proxy.RuntimeDir(e.home, "")
	for _, d := range []string{filepath.Join(e.home, "proxy", "mnt"), filepath.Join(runDir, "mnt")} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("denied run made a mountpoint: %v", err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(e.home, "mounts")); len(ents) != 0 {
		t.Errorf("denied run left mount records: %v", ents)
	}
	// The run is kept all the same.
	if code, out, _ := e.avfs("", "--json", "proxy", "show", env.ID); code != 0 || !strings.Contains(out, `"denied"`) {
		t.Errorf("proxy show: %d %s", code, out)
	}
}

func TestRunThroughMount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(0, "", "--shell", "echo one > keep.txt; echo two > gone.txt; echo three > old.txt; mkdir sub")
	env := e.exec(0, "", "--transport", "fuse", "--cwd", "sub", "--env", "FOO=bar", "--shell",
		`echo "$AVFS_VAULT $FOO $(basename "$PWD")"; echo more >> ../keep.txt; rm ../gone.txt; mv ../old.txt ../new.txt; echo n > new2.txt`)
	r := env.Result
	if r.Stdout != "v bar sub\n" || *r.ExitCode != 0 || !env.Success || r.State != proxy.StateCompleted {
		t.Fatalf("run: %+v", r)
	}
	got := map[string]string{}
	for _, c := range r.Changes {
		got[c.Path] = c.Kind
		if c.Kind == "renamed" && (c.From == nil || *c.From != "/old.txt") {
			t.Errorf("rename without its source: %+v", c)
		}
	}
	want := map[string]string{"/keep.txt": "modified", "/gone.txt": "deleted", "/new.txt": "renamed", "/sub/new2.txt": "added"}
	for p, k := range want {
		if got[p] != k {
			t.Errorf("change of %s: %q, want %q (all: %v)", p, got[p], k, got)
		}
	}
	if r.ChangedFiles != len(r.Changes) || len(r.Changes) != 4 {
		t.Errorf("changed_files %d, changes %v", r.ChangedFiles, got)
	}
	if r.Checkpoint == nil || !r.Checkpoint.Kept || !r.Checkpoint.Requested {
		t.Errorf("checkpoint: %+v", r.Checkpoint)
	}
	for _, s := range proxy.Stages {
		if _, ok := r.StageMs[s]; !ok {
			t.Errorf("stage %s not timed", s)
		}
	}
	if r.StageMs[proxy.StateExecute] <= 0 || r.StageMs[proxy.StateMount] <= 0 {
		t.Errorf("stage times: %v", r.StageMs)
	}
}

func TestTimeoutKeepsOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := e.exec(124, "", "--timeout", "500ms", "--grace", "200ms", "--", "sh", "-c", "echo start; sleep 30")
	r := env.Result
	if r.State != proxy.StateTimedOut || !r.TimedOut || r.Stdout != "start\n" || r.Signal == nil || *r.Signal != "SIGTERM" || env.Success {
		t.Fatalf("timed out run: %+v", r)
	}
	if r.DurationMs > 10000 {
		t.Errorf("took %.0f ms", r.DurationMs)
	}
	// A command that ignores SIGTERM is killed after the grace period.
	env = e.exec(124, "", "--timeout", "300ms", "--grace", "200ms", "--shell", "trap '' TERM; echo x; sleep 30")
	if r := env.Result; r.State != proxy.StateTimedOut || !r.TimedOut || r.Signal == nil || *r.Signal != "SIGKILL" || r.Stdout != "x\n" {
		t.Fatalf("SIGTERM-proof run: %+v", r)
	}
}

func TestOutputLimitAndExitCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := e.exec(0, "", "--max-output", "100", "--", "seq", "1", "100000")
	r := env.Result
	if len(r.Stdout) != 100 || !r.StdoutTruncated || r.StderrTruncated || r.StdoutBytes <= 100000 {
		t.Errorf("truncation: %d bytes kept of %d, truncated %v", len(r.Stdout), r.StdoutBytes, r.StdoutTruncated)
	}
	if env := e.exec(127, "", "--", "no-such-program-avfs"); *env.Result.ExitCode != 127 || env.Result.State != proxy.StateCompleted {
		t.Errorf("missing program: %+v", env.Result)
	}
	if env := e.exec(3, "", "--", "sh", "-c", "exit 3"); *env.Result.ExitCode != 3 || env.Success {
		t.Errorf("exit 3: %+v", env.Result)
	}
	if env := e.exec(0, "hello\n", "--stdin", "--", "cat"); env.Result.Stdout != "hello\n" {
		t.Errorf("stdin: %q", env.Result.Stdout)
	}
	if env := e.exec(0, "hello\n", "--", "cat"); env.Result.Stdout != "" {
		t.Errorf("stdin without --stdin: %q", env.Result.Stdout)
	}
	if env := e.exec(143, "", "--shell", "kill -TERM $$"); env.Result.Signal == nil || *env.Result.Signal != "SIGTERM" {
		t.Errorf("killed by a signal: %+v", env.Result)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--cwd", "../x", "--", "ls"); code != 5 || !strings.Contains(out, "InvalidPath") {
		t.Errorf("--cwd ../x: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--cwd", "nope", "--", "ls"); code != 3 || !strings.Contains(out, "NotFound") {
		t.Errorf("--cwd nope: %d %s", code, out)
	}
}

func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.home, "policy.toml"),
		[]byte("version = 1\n[[rule]]\nname = \"ask\"\nprogram = [\"echo\"]\naction = \"require_approval\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := e.exec(15, "", "--cwd", "/", "--", "echo", "approved")
	r := env.Result
	if r.State != proxy.StateAwaitingApproval || r.Approval == nil || r.Approval.ID != env.ID || r.ExitCode != nil || r.Checkpoint != nil {
		t.Fatalf("awaiting run: %+v", r)
	}
	id := env.ID
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", id); code != 15 || !strings.Contains(out, "ApprovalRequired") {
		t.Fatalf("unapproved: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "approve", id); code != 0 || !strings.Contains(out, `"approved"`) {
		t.Fatalf("approve: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", id, "--", "echo", "other"); code != 15 || !strings.Contains(out, "ApprovalMismatch") {
		t.Fatalf("other command: %d %s", code, out)
	}
	env = e.exec(0, "", "--approval", id)
	if env.Result.Stdout != "approved\n" || env.Result.Approval == nil || env.Result.Approval.Status != "used" {
		t.Fatalf("approved run: %+v", env.Result)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", id); code != 15 || !strings.Contains(out, "ApprovalUsed") {
		t.Fatalf("second use: %d %s", code, out)
	}
	env = e.exec(15, "", "--", "echo", "no")
	if code, _, _ := e.avfs("", "--json", "proxy", "reject", env.ID); code != 0 {
		t.Fatal("reject failed")
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--approval", env.ID); code != 15 || !strings.Contains(out, "ApprovalRejected") {
		t.Fatalf("rejected: %d %s", code, out)
	}
}

func TestUndoAndHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(0, "", "--shell", "echo 0 > base.txt")
	first := e.exec(0, "", "--shell", "echo 1 > one.txt")
	second := e.exec(0, "", "--shell", "echo 2 > two.txt; rm base.txt")
	code, out, _ := e.avfs("", "--json", "proxy", "undo", first.ID)
	if code != 0 || !strings.Contains(out, first.ID) || !strings.Contains(out, second.ID) {
		t.Fatalf("undo: %d %s", code, out)
	}
	code, out, _ = e.avfs("", "--json", "ls", "/")
	if code != 0 || !strings.Contains(out, "base.txt") || strings.Contains(out, "one.txt") || strings.Contains(out, "two.txt") {
		t.Fatalf("after undo: %s", out)
	}
	code, out, _ = e.avfs("", "--json", "proxy", "undo", second.ID)
	if code == 0 || !strings.Contains(out, "already undone") {
		t.Errorf("undo twice: %d %s", code, out)
	}
	code, out, _ = e.avfs("", "--json", "proxy", "history")
	if code != 0 || strings.Count(out, `"id"`) != 3 || strings.Count(out, `"undone_by": "undo of `+first.ID) != 2 {
		t.Errorf("history: %s", out)
	}
}

func TestOneRunPerVault(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 1.5 s run")
	}
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{})
	done := make(chan *proxy.Envelope)
	go func() {
		defer close(done)
		close(started)
		var out bytes.Buffer
		code := cli.Run(context.Background(), []string{"--json", "proxy", "exec", "--", "sleep", "1.5"}, cli.Env{
			Stdout: &out, Stderr: &bytes.Buffer{}, IsTerminal: func(any) bool { return false },
			Getenv: e.getenv,
		})
		var env proxy.Envelope
		if code == 0 && json.Unmarshal(out.Bytes(), &env) == nil {
			done <- &env
		}
	}()
	<-started
	// Wait until the first run holds the vault, then try a second.
	// It mounts the vault only once it holds it; probing the lock itself
	// could make the first run fail instead.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, out, _ := e.avfs("", "--json", "mounts"); strings.Contains(out, `"live": true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never took the vault's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, out, _ := e.avfs("", "--json", "proxy", "exec", "--", "true")
	if code != 6 || !strings.Contains(out, "VaultLocked") {
		t.Errorf("second run: %d %s", code, out)
	}
	if env := <-done; env == nil {
		t.Fatal("the first run failed")
	}
}

// TestKeepMount runs on both engines: the kept mount's server takes the
// checkpoint and the summary, so even bbolt, which locks its file against
// a second opener, works beside it.
func TestKeepMount(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) { testKeepMount(t, engine) })
	}
}

func testKeepMount(t *testing.T, engine string) {
	e := newEnv(t)
	if engine != "sqlite" {
		if code, out, errOut := e.avfs("", "vault", "create", "b", "--backend", engine, "--use"); code != 0 {
			t.Fatalf("vault create: %d %s %s", code, out, errOut)
		}
	}
	first := e.exec(0, "", "--keep-mount", "--shell", "echo a > a.txt")
	if first.Result.MountReused || first.Result.Mountpoint == nil {
		t.Fatalf("first: %+v", first.Result)
	}
	mnt := *first.Result.Mountpoint
	t.Cleanup(func() { e.avfs("", "unmount", mnt) })
	second := e.exec(0, "", "--shell", "cat a.txt; echo b > b.txt")
	if !second.Result.MountReused || *second.Result.Mountpoint != mnt || second.Result.Stdout != "a\n" {
		t.Fatalf("second: %+v", second.Result)
	}
	if len(second.Result.Changes) != 1 || second.Result.Changes[0].Path != "/b.txt" {
		t.Errorf("changes through a reused mount: %+v", second.Result.Changes)
	}
	// Both envelopes name the transport: the first the one it started,
	// the second the one its record says serves the mount it reused.
	for i, env := range []*proxy.Envelope{first, second} {
		if env.Result.Transport == nil || *env.Result.Transport != "fuse" {
			t.Errorf("run %d: transport %v, want fuse", i+1, env.Result.Transport)
		}
	}
	// The kept mount is the vault's writer: undo must wait for it to go.
	if code, out, _ := e.avfs("", "--json", "proxy", "undo"); code != 6 {
		t.Errorf("undo beside a read-write mount: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s", out)
	}
}

func TestReadonly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(0, "", "--shell", "echo a > a.txt")
	env := e.exec(2, "", "--readonly", "--shell", "cat a.txt; echo b > b.txt")
	r := env.Result
	if r.Stdout != "a\n" || r.Checkpoint != nil || len(r.Changes) != 0 || !strings.Contains(r.Stderr, "Read-only") {
		t.Fatalf("read-only run: %+v", r)
	}
	if cps := e.checkpoints(); len(cps) != 1 {
		t.Errorf("checkpoints after a read-only run: %v", cps)
	}
}

// TestLinger checks the default path of runs: a run's mount stays, warm,
// for the next run; it gives way to a CLI write when idle and only then;
// and it ends by itself after its idle timeout, with every write kept.
func TestLinger(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) { testLinger(t, engine) })
	}
}

func testLinger(t *testing.T, engine string) {
	e := newEnv(t)
	if engine != "sqlite" {
		if code, out, errOut := e.avfs("", "vault", "create", "b", "--backend", engine, "--use"); code != 0 {
			t.Fatalf("vault create: %d %s %s", code, out, errOut)
		}
	}
	e.linger = "30s" // the default a person gets, from $AVFS_PROXY_LINGER
	// Lingering is FUSE's: an overlay run is ingested at its end.
	first := e.exec(0, "", "--transport", "fuse", "--shell", "echo a > a.txt")
	if first.Result.MountReused || first.Result.Mountpoint == nil {
		t.Fatalf("first: %+v", first.Result)
	}
	mnt := *first.Result.Mountpoint
	t.Cleanup(func() { e.avfs("", "unmount", mnt) })
	if m := e.mounts(); len(m) != 1 || !m[0].Live || m[0].IdleTimeoutMS != 30000 {
		t.Fatalf("after a run: mounts %+v", m)
	}
	second := e.exec(0, "", "--transport", "fuse", "--shell", "cat a.txt; echo b > b.txt")
	if !second.Result.MountReused || *second.Result.Mountpoint != mnt || second.Result.Stdout != "a\n" {
		t.Fatalf("second: %+v", second.Result)
	}
	if len(second.Result.Changes) != 1 || second.Result.Changes[0].Path != "/b.txt" {
		t.Errorf("changes through a lingering mount: %+v", second.Result.Changes)
	}

	// A file open in the mount keeps it: a CLI write is refused, typed.
	f, err := os.Open(filepath.Join(mnt, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := e.avfs("", "write", "/c.txt", "c")
	f.Close()
	if code != 6 || !strings.Contains(errOut, "files in use") {
		t.Errorf("write beside a busy idle mount: exit %d, %s", code, errOut)
	}
	// Idle, it gives way: the write runs and the mount is gone.
	if code, _, errOut := e.avfs("", "write", "/c.txt", "c"); code != 0 {
		t.Fatalf("write beside an idle mount: exit %d, %s", code, errOut)
	}
	if m := e.mounts(); len(m) != 0 {
		t.Fatalf("the idle mount did not give way: %+v", m)
	}
	if code, out, _ := e.avfs("", "cat", "/b.txt"); code != 0 || out != "b\n" {
		t.Errorf("a run's write after the mount gave way: %d %q", code, out)
	}

	// A run in progress holds its mount: a write waits for nothing and
	// fails; the run goes on undisturbed.
	third := e.exec(0, "", "--transport", "fuse", "--", "true")
	if third.Result.MountReused {
		t.Fatalf("third started no mount: %+v", third.Result)
	}
	mnt = *third.Result.Mountpoint
	done := make(chan int)
	go func() {
		code, _, _ := e.avfs("", "--json", "proxy", "exec", "--transport", "fuse", "--shell", "touch started; sleep 1; echo late > late.txt")
		done <- code
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(mnt, "started")); err == nil {
			break
		}
		if i == 2000 {
			t.Fatal("the run did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _, errOut := e.avfs("", "write", "/d.txt", "d"); code != 6 || !strings.Contains(errOut, "proxy run") {
		t.Errorf("write during a run: exit %d, %s", code, errOut)
	}
	if code := <-done; code != 0 {
		t.Fatalf("the run beside a refused write: exit %d", code)
	}

	// Unused, it ends by itself after its idle timeout.
	if code, out, errOut := e.avfs("", "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s%s", out, errOut)
	}
	e.exec(0, "", "--transport", "fuse", "--linger", "200ms", "--", "true")
	for i := 0; len(e.mounts()) > 0; i++ {
		if i == 1000 {
			t.Fatalf("the mount outlived its idle timeout: %+v", e.mounts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, out, _ := e.avfs("", "cat", "/late.txt"); code != 0 || out != "late\n" {
		t.Errorf("a run's write after its mount ended: %d %q", code, out)
	}
	if code, _, errOut := e.avfs("", "write", "/d.txt", "d"); code != 0 {
		t.Errorf("write after the mount ended: exit %d, %s", code, errOut)
	}

	// Undo ends a lingering mount of the vault before it restores.
	e.exec(0, "", "--transport", "fuse", "--shell", "echo e > e.txt")
	if code, out, errOut := e.avfs("", "--json", "proxy", "undo"); code != 0 {
		t.Fatalf("undo beside a lingering mount: exit %d %s%s", code, out, errOut)
	}
	if m := e.mounts(); len(m) != 0 {
		t.Errorf("undo left the lingering mount: %+v", m)
	}
	if code, _, _ := e.avfs("", "cat", "/e.txt"); code == 0 {
		t.Error("undo did not remove the run's file")
	}
}

func (e *env) mounts() []mountrec.Info {
	e.t.Helper()
	code, out, _ := e.avfs("", "--json", "mounts")
	if code != 0 {
		e.t.Fatalf("mounts: %s", out)
	}
	var r struct {
		Mounts []mountrec.Info `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatal(err)
	}
	return r.Mounts
}

// TestStorePutIsDurable: a run record is replaced with an fsync of the
// record and of its directory; a disk that fails the fsync fails Put and
// leaves the record as it was.
func TestStorePutIsDurable(t *testing.T) {
	s := fsynctest.Mount(t)
	store, err := proxy.NewStore(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &proxy.Envelope{SchemaVersion: proxy.SchemaVersion, Kind: proxy.Kind, ID: "r1"}
	e.Result.State = proxy.StateAwaitingApproval
	if err := store.Put(e); err != nil {
		t.Fatal(err)
	}
	tmp := func(p string) bool { return strings.HasPrefix(p, "proxy/runs/.r1.json.tmp-") }
	if s.FileSyncs(tmp) != 1 || s.DirSyncs("proxy/runs") != 1 {
		t.Errorf("Put synced the record %d times and its directory %d times, want 1 and 1", s.FileSyncs(tmp), s.DirSyncs("proxy/runs"))
	}
	e.Result.State = proxy.StateCompleted
	s.Fail(true)
	err = store.Put(e)
	s.Fail(false)
	if !errs.Is(err, errs.IoError) {
		t.Fatalf("Put on a failing disk: %v, want IoError", err)
	}
	if got, err := store.Get("r1"); err != nil || got.Result.State != proxy.StateAwaitingApproval {
		t.Fatalf("the record after a failed Put: %+v, %v; want the old one", got, err)
	}
}
