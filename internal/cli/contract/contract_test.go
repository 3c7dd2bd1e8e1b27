// Package contract_test checks the JSON contract: it runs every avfs
// command in-process and validates what it prints against docs/schema. It
// lives apart from package cli so that the test binary the scripts run as
// avfs does not carry the schema validator.
package contract_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/cli"
)

// TestMain lets the test binary stand in for avfs when `avfs mount` starts
// its serving process (cli.MountExecutable is this binary then).
func TestMain(m *testing.M) {
	if os.Getenv("AVFS_CONTRACT_AS_AVFS") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv("AVFS_CONTRACT_AS_AVFS", "1") // for the children only: this process is past the check
	os.Exit(m.Run())
}

// canMount reports whether this machine can serve FUSE mounts here.
func canMount() bool {
	_, err := os.Stat("/dev/fuse")
	return err == nil && os.Geteuid() == 0
}

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
	code = cli.Run(context.Background(), args, cli.Env{
		Stdin:      strings.NewReader(stdin),
		Stdout:     &out,
		Stderr:     &errOut,
		Getenv:     func(k string) string { return r.env[k] },
		IsTerminal: func(any) bool { return r.term },
	})
	return code, out.String(), errOut.String()
}

// strict loads a schema file and forbids, wherever an object lists its
// properties, any property it does not list. The published schemas stay
// open (fields may be added); the test makes sure every field printed is
// documented.
func strict(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			x[k] = strict(c)
		}
		if _, ok := x["properties"]; ok {
			if _, ok := x["additionalProperties"]; !ok {
				x["unevaluatedProperties"] = false
			}
		}
	case []any:
		for i, c := range x {
			x[i] = strict(c)
		}
	}
	return v
}

// loadSchemas compiles every docs/schema/*.json, strictly.
func loadSchemas(t *testing.T) map[string]*jsonschema.Schema {
	dir, err := filepath.Abs("../../../docs/schema")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in %s: %v", dir, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource("file://"+f, strict(doc)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		s, err := c.Compile("file://" + f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = s
	}
	return out
}

// schemaOf returns the schema a command line's success output follows.
func schemaOf(t *testing.T, args []string) string {
	root := cli.NewCommand()
	cmd, _, err := root.Find(args)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if s, ok := cli.Schemas[cmd.CommandPath()]; ok {
		return s
	}
	if slices.Contains(args, "--help") {
		return "help"
	}
	return ""
}

// TestJSONSchemas runs every command, on success and on failure, and
// validates what it prints against docs/schema.
func TestJSONSchemas(t *testing.T) {
	t.Parallel()
	schemas := loadSchemas(t)
	r := newRunner(t)
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "src", "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"src/a.txt": "a", "src/d/b.txt": "bb"} {
		if err := os.WriteFile(filepath.Join(host, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(host, "src", "l")); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(r.home, "vaults", "junk.avfs")
	src, out := filepath.Join(host, "src"), filepath.Join(host, "out")

	steps := []step{
		{args: []string{"vault", "list"}},
		{args: []string{"vault", "create", "v", "--use", "--max-files", "1000"}},
		{args: []string{"vault", "create", "v"}, fail: true},
		{args: []string{"vault", "create", "../x"}, fail: true},
		{args: []string{"vault", "info"}},
		{args: []string{"vault", "use", "v"}},
		{args: []string{"write", "/f.txt", "hello"}},
		{args: []string{"write", "/f.txt", "--append"}, stdin: " world"},
		{args: []string{"write", "/bin", "\xff\xfe"}},
		{args: []string{"cat", "/f.txt"}},
		{args: []string{"cat", "/bin"}},
		{args: []string{"cat", "/nope"}, fail: true},
		{args: []string{"mkdir", "/d"}},
		{args: []string{"mkdir", "-p", "/d/e/f"}},
		{args: []string{"ln", "-s", "f.txt", "/link"}},
		{args: []string{"ln", "/f.txt", "/hard"}},
		{args: []string{"ls", "-l", "/"}},
		{args: []string{"ls", "/f.txt"}},
		{args: []string{"tree", "-L", "2"}},
		{args: []string{"stat", "/link"}},
		{args: []string{"chmod", "go-r", "/f.txt"}},
		{args: []string{"cp", "-r", "/d", "/d2"}},
		{args: []string{"mv", "/d2", "/d3"}},
		{args: []string{"rm", "-r", "/d3"}},
		{args: []string{"rm", "/d"}, fail: true},
		{args: []string{"ls", "../up"}, fail: true},
		{args: []string{"import", src, "/imp"}},
		{args: []string{"export", "/imp", out}},
		{args: []string{"export", "/imp", out}, fail: true},
		{args: []string{"checkpoint", "save", "one", "-m", "msg"}},
		{args: []string{"checkpoint", "list"}},
		{args: []string{"checkpoint", "info", "one"}},
		{args: []string{"write", "/g.txt", "g"}},
		{args: []string{"checkpoint", "diff"}},
		{args: []string{"diff", "--patch"}},
		{args: []string{"cat", "/g.txt", "--at", "one"}, fail: true},
		{args: []string{"ls", "/", "--at", "one"}},
		{args: []string{"checkpoint", "restore", "one"}},
		{args: []string{"checkpoint", "delete", "one"}},
		{args: []string{"checkpoint", "info", "one"}, fail: true},
		{args: []string{"checkpoint", "prune", "--keep", "0", "--dry-run"}},
		{args: []string{"checkpoint", "prune", "--older-than", "soon"}, fail: true},
		{args: []string{"vault", "set", "v", "run-checkpoints=10"}},
		{args: []string{"vault", "set", "v", "run-checkpoints=-3"}, fail: true},
		{args: []string{"quota"}},
		{args: []string{"quota", "set", "max_files", "3"}},
		{args: []string{"write", "/q1", "x"}, fail: true},
		{args: []string{"quota", "clear", "max_files"}},
		{args: []string{"vault", "fork", "v", "w"}},
		{args: []string{"checkpoint", "diff", "vault:v", "vault:w"}},
		{args: []string{"diff", "vault:v", "vault:w"}},
		{args: []string{"diff", "vault:v", "vault:nope"}, fail: true},
		{args: []string{"write", "--vault", "w", "/merged.txt", "m"}},
		{args: []string{"vault", "merge", "w", "--dry-run"}},
		{args: []string{"vault", "merge", "w"}},
		{args: []string{"vault", "merge", "v"}, fail: true},
		{args: []string{"apply", out, "--from", "vault:w", "--dry-run"}},
		{args: []string{"apply", out}, fail: true},
		{args: []string{"vault", "info", "v"}},
		{args: []string{"vault", "delete", "v", "--yes"}, fail: true},
		{args: []string{"vault", "delete", "w"}, fail: true},
		{args: []string{"vault", "delete", "w", "--yes"}},
		{args: []string{"fsck"}},
		{args: []string{"gc"}},
		{args: []string{"compact"}},
		{args: []string{"version"}},
		{args: []string{"completion", "bash"}},
		{args: []string{"vault", "--help"}},
		{args: []string{"help", "ls"}},
		{args: []string{"nosuch"}, fail: true},
		{args: []string{"ls", "--bogus"}, fail: true},
		{args: []string{"vault", "info", "junk"}, fail: true},
		{args: []string{"vault", "list"}},
		{args: []string{"ls", "--vault", "missing"}, fail: true},
		{args: []string{"mounts"}},
		{args: []string{"unmount", filepath.Join(host, "not-mounted")}, fail: true},
		// The policy and the proxy steps that mount nothing.
		{args: []string{"policy", "show"}},
		{args: []string{"policy", "check", "--", "ls", "-l"}},
		{args: []string{"policy", "check", "--shell", "echo $(curl x) > ~/y"}},
		{args: []string{"policy", "check"}, fail: true},
		{args: []string{"proxy", "exec", "--", "cat", "/etc/passwd"}, exit: 14},
		{args: []string{"proxy", "show", "@last"}},
		{args: []string{"proxy", "exec", "--", "curl", "x"}, exit: 15},
		{args: []string{"proxy", "exec", "--approval", "@last"}, fail: true},
		{args: []string{"proxy", "reject", "@last"}},
		{args: []string{"proxy", "approve", "@last"}, fail: true},
		{args: []string{"proxy", "history"}},
		{args: []string{"proxy", "show", "nosuch"}, fail: true},
		{args: []string{"proxy", "undo"}, fail: true},
	}
	if canMount() {
		mnt := filepath.Join(host, "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.run("", "unmount", "--lazy", mnt) })
		policyFile := filepath.Join(r.home, "policies", "m.toml")
		if err := os.MkdirAll(filepath.Dir(policyFile), 0o700); err != nil {
			t.Fatal(err)
		}
		rule := "version = 1\n[[rule]]\nname = \"ask\"\nprogram = [\"true\"]\naction = \"require_approval\"\n"
		if err := os.WriteFile(policyFile, []byte(rule), 0o600); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, []step{
			{args: []string{"mount", "w2", mnt}, fail: true},
			{args: []string{"vault", "create", "m"}},
			{args: []string{"mount", "m", mnt}},
			{args: []string{"mounts"}},
			{args: []string{"unmount", mnt}},
			{args: []string{"mount", "m", mnt, "--transport", "overlay"}},
			{args: []string{"mounts"}},
			{args: []string{"unmount", mnt}},
			{args: []string{"mount", "m", mnt, "--transport", "overlay"}},
			{args: []string{"unmount", "--discard", mnt}},
			{args: []string{"proxy", "exec", "--vault", "m", "--shell", "echo hi > a.txt; mkdir d; mv a.txt d/b.txt"}},
			{args: []string{"proxy", "exec", "--vault", "m", "--timeout", "300ms", "--", "sh", "-c", "echo start; sleep 5"}, exit: 124},
			{args: []string{"proxy", "exec", "--vault", "m", "--", "no-such-program-avfs"}, exit: 127},
			{args: []string{"proxy", "exec", "--vault", "m", "--isolate", "off", "--", "sh", "-c", "echo off"}},
			{args: []string{"policy", "check", "--vault", "m", "--", "sh", "-c", "echo off"}},
			{args: []string{"proxy", "exec", "--vault", "m", "--", "true"}, exit: 15},
			{args: []string{"proxy", "approve", "@last"}},
			{args: []string{"proxy", "exec", "--vault", "m", "--approval", "@last"}},
			{args: []string{"proxy", "undo", "--vault", "m"}},
			{args: []string{"proxy", "redo", "--vault", "m"}},
			{args: []string{"proxy", "redo", "--vault", "m"}, fail: true},
			{args: []string{"proxy", "history", "--vault", "m"}},
		}...)
	} else {
		t.Log("no /dev/fuse or not root: the mount and unmount schemas are not exercised")
	}
	used := map[string]bool{}
	lastRun := "" // "@last" in a step's arguments stands for the latest proxy run's id
	for _, st := range steps {
		st.args = slices.Clone(st.args)
		for i, a := range st.args {
			if a == "@last" {
				st.args[i] = lastRun
			}
		}
		if st.args[len(st.args)-1] == "junk" {
			if err := os.WriteFile(garbage, []byte("not a vault at all"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		args := append(slices.Clone(st.args), "--json")
		if i := slices.Index(st.args, "--"); i >= 0 {
			args = slices.Insert(slices.Clone(st.args), i, "--json") // after --, it would be the command's
		}
		code, stdout, stderr := r.run(st.stdin, args...)
		if st.exit != 0 && code != st.exit {
			t.Errorf("avfs %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, st.exit, stdout, stderr)
			continue
		}
		if (code != 0) != st.fail && st.exit == 0 {
			t.Errorf("avfs %s: exit %d, want failure %v\n%s%s", strings.Join(args, " "), code, st.fail, stdout, stderr)
			continue
		}
		doc := decodeOne(t, args, stdout)
		name := schemaOf(t, st.args)
		if m, ok := doc.(map[string]any); ok && m["kind"] == "proxy_exec_result" {
			lastRun, _ = m["id"].(string)
		}
		if code != 0 && st.exit == 0 {
			name = "error"
			m, _ := doc.(map[string]any)
			if m["exit_code"] != float64(code) {
				t.Errorf("avfs %s: exit %d, but exit_code %v", strings.Join(args, " "), code, m["exit_code"])
			}
		}
		if name == "" {
			t.Errorf("avfs %s: no schema for this command", strings.Join(args, " "))
			continue
		}
		used[name] = true
		if err := schemas[name].Validate(doc); err != nil {
			t.Errorf("avfs %s: output does not follow %s.json: %v\n%s", strings.Join(args, " "), name, err, stdout)
		}
	}
	// Documents that are not one command's one output have tests of their
	// own: the lines of proxy exec --stream, and what a serving avfs mcp
	// prints (stream_test.go).
	ownTests := map[string]bool{"proxy-exec-stream": true, "mcp": true}
	for name := range schemas {
		if name != "common" && !ownTests[name] && !used[name] && (canMount() || (name != "mount" && name != "unmount" && name != "proxy-undo" && name != "proxy-redo")) {
			t.Errorf("schema %s.json is never exercised", name)
		}
	}
}

// step is one command line of TestJSONSchemas: it fails (and prints an
// error document), or exits with exit while printing its own result (a
// proxy run passes on its command's exit code), or succeeds.
type step struct {
	args  []string
	stdin string
	fail  bool
	exit  int
}

// decodeOne checks that out is exactly one JSON document and returns it.
func decodeOne(t *testing.T, args []string, out string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("avfs %s: stdout is not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("avfs %s: more than one JSON document on stdout:\n%s", strings.Join(args, " "), out)
	}
	return doc
}

// TestSchemaMap keeps Schemas, the command tree and docs/schema in step:
// every command that is not just a group of subcommands has a schema.
func TestSchemaMap(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range allCommands(cli.NewCommand()) {
		s, ok := cli.Schemas[c.CommandPath()]
		if !ok && c.HasSubCommands() {
			continue
		}
		if !ok {
			t.Errorf("command %q has no schema in Schemas", c.CommandPath())
			continue
		}
		seen[c.CommandPath()] = true
		if _, err := os.Stat(filepath.Join("../../../docs/schema", s+".json")); err != nil {
			t.Errorf("command %q: %v", c.CommandPath(), err)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(cli.Schemas)) {
		if !seen[p] {
			t.Errorf("Schemas names %q, which is not a command", p)
		}
	}
}

// allCommands lists the visible commands below root, help included.
func allCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.Hidden {
			continue
		}
		out = append(out, c)
		out = append(out, allCommands(c)...)
	}
	return out
}
