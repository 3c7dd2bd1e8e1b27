package refs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/cli"
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestMain lets the test binary stand in for avfs when a proxy run starts
// its mount.
func TestMain(m *testing.M) {
	if os.Getenv("AVFS_REFS_TEST_AS_AVFS") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv("AVFS_REFS_TEST_AS_AVFS", "1") // for the children only
	os.Exit(m.Run())
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want refs.Ref
		bad  bool
	}{
		{in: "@", want: refs.Ref{}},
		{in: "before", want: refs.Ref{Checkpoint: "before"}},
		{in: "vault:w", want: refs.Ref{Vault: "w"}},
		{in: "vault:w@cp-3", want: refs.Ref{Vault: "w", Checkpoint: "cp-3"}},
		{in: "run:20260101T000000.1-ab", want: refs.Ref{Run: "20260101T000000.1-ab"}},
		{in: "run:20260101T000000.1-ab^after", want: refs.Ref{Run: "20260101T000000.1-ab", After: true}},
		{in: "", bad: true},
		{in: "vault:", bad: true},
		{in: "vault:w@", bad: true},
		{in: "vault:../x", bad: true},
		{in: "run:", bad: true},
		{in: "run:^after", bad: true},
		{in: "run:a/b", bad: true},
		{in: "cp^after", bad: true},
		{in: "-x", bad: true},
	} {
		got, err := refs.Parse(c.in)
		if c.bad {
			if !errs.Is(err, errs.InvalidInput) {
				t.Errorf("Parse(%q) = %+v, %v; want InvalidInput", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

type env struct {
	t    *testing.T
	home string
}

func (e *env) avfs(args ...string) (int, string) {
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv:     func(k string) string { return map[string]string{"AVFS_HOME": e.home, "AVFS_PROXY_LINGER": "0"}[k] },
		IsTerminal: func(any) bool { return false },
	})
	return code, out.String() + errOut.String()
}

func (e *env) ok(args ...string) string {
	e.t.Helper()
	code, out := e.avfs(args...)
	if code != 0 {
		e.t.Fatalf("avfs %s: exit %d: %s", strings.Join(args, " "), code, out)
	}
	return out
}

// Every REF form reads its state, through the command line and through a
// Resolver; a REF naming nothing is a NotFound that names the REF.
func TestResolve(t *testing.T) {
	e := &env{t: t, home: t.TempDir()}
	e.ok("vault", "create", "v", "--use")
	e.ok("write", "/a", "saved")
	e.ok("checkpoint", "save", "cp")
	e.ok("write", "/a", "working")
	e.ok("vault", "fork", "v", "w")
	e.ok("write", "--vault", "w", "/a", "fork")

	for ref, want := range map[string]string{"@": "working", "cp": "saved", "vault:v@cp": "saved", "vault:w": "fork", "vault:v": "working"} {
		if got := e.ok("cat", "/a", "--at", ref); got != want {
			t.Errorf("cat /a --at %s = %q, want %q", ref, got, want)
		}
	}
	if _, err := os.Stat("/dev/fuse"); err == nil && os.Geteuid() == 0 {
		var env struct{ ID string }
		out := e.ok("proxy", "exec", "--json", "--shell", "echo run > a")
		if err := json.Unmarshal([]byte(out), &env); err != nil || env.ID == "" {
			t.Fatalf("proxy exec: %v %s", err, out)
		}
		e.ok("write", "/a", "after the run")
		for ref, want := range map[string]string{"run:" + env.ID: "working", "run:" + env.ID + "^after": "run\n", "@": "after the run"} {
			if got := e.ok("cat", "/a", "--at", ref); got != want {
				t.Errorf("cat /a --at %s = %q, want %q", ref, got, want)
			}
		}
		e.ok("checkpoint", "save", "later")
		e.ok("write", "/a", "later still")
		e.ok("compact")
		if got := e.ok("cat", "/a", "--at", "run:"+env.ID+"^after"); got != "run\n" {
			t.Errorf("after the run, once saved over and compacted: %q", got)
		}
	} else {
		t.Log("no /dev/fuse or not root: run: REFs are not exercised")
	}

	for ref, kind := range map[string]errs.Kind{
		"nope": errs.CheckpointNotFound, "vault:nope": errs.VaultNotFound, "vault:v@nope": errs.CheckpointNotFound,
		"run:nope": errs.NotFound, "run:nope^after": errs.NotFound, "bad/ref": errs.InvalidInput,
	} {
		code, out := e.avfs("cat", "/a", "--json", "--at", ref)
		var doc map[string]any
		_ = json.Unmarshal([]byte(out), &doc)
		if code == 0 || doc["error"] != string(kind) || doc["ref"] != ref || !strings.Contains(doc["message"].(string), ref) {
			t.Errorf("cat --at %s: exit %d, %s; want %s naming the REF", ref, code, out, kind)
		}
	}

	h, err := registry.Open(e.home)
	if err != nil {
		t.Fatal(err)
	}
	r := refs.NewResolver(h, func() (string, error) { return "v", nil })
	defer r.Close()
	s, err := r.Resolve("vault:w")
	if err != nil || s.Name != "vault:w" || s.Vault.Name() != "w" {
		t.Fatalf("Resolve(vault:w) = %+v, %v", s, err)
	}
	if s, err = r.Resolve("cp"); err != nil || s.Name != "vault:v@cp" {
		t.Fatalf("Resolve(cp) = %+v, %v", s, err)
	}
}
