package cli

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestManifestUpToDate fails when docs/commands.json is not what the
// command tree generates. Regenerate with `go run ./internal/cli/genmanifest`.
func TestManifestUpToDate(t *testing.T) {
	t.Parallel()
	const file = "../../docs/commands.json"
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is out of date: run `go run ./internal/cli/genmanifest` (then `node npm/scripts/gen-types.mjs`)", file)
	}
}

func TestArgsOf(t *testing.T) {
	t.Parallel()
	a := func(name string, opt, variadic bool) ManifestArg { return ManifestArg{name, opt, variadic} }
	for _, c := range []struct {
		use  string
		want []ManifestArg
	}{
		{"list", []ManifestArg{}},
		{"fork SOURCE NAME", []ManifestArg{a("SOURCE", false, false), a("NAME", false, false)}},
		{"diff [FROM [TO]]", []ManifestArg{a("FROM", true, false), a("TO", true, false)}},
		{"mount [VAULT] MOUNTPOINT", []ManifestArg{a("VAULT", true, false), a("MOUNTPOINT", false, false)}},
		{"exec [flags] (--shell SCRIPT | -- ARGV...)", []ManifestArg{a("ARGV", true, true)}},
		{"check [--shell SCRIPT | -- ARGV...]", []ManifestArg{a("ARGV", true, true)}},
	} {
		if got := argsOf(c.use); !reflect.DeepEqual(got, c.want) {
			t.Errorf("argsOf(%q) = %+v, want %+v", c.use, got, c.want)
		}
	}
}

// TestManifestArgsMatchValidators: the arguments read from each Use line
// are what the command's cobra Args validator accepts, by count.
func TestManifestArgsMatchValidators(t *testing.T) {
	t.Parallel()
	root := NewCommand()
	for _, mc := range manifestOf(t).Commands {
		cmd, _, err := root.Find(mc.Path)
		if err != nil || cmd.Args == nil {
			t.Fatalf("%v: %v (validator %v)", mc.Path, err, cmd.Args != nil)
		}
		req, max := 0, len(mc.Args)
		for _, arg := range mc.Args {
			if !arg.Optional {
				req++
			}
			if arg.Variadic {
				max = -1
			}
		}
		n := func(k int) []string { return strings.Fields(strings.Repeat("x ", k)) }
		if err := cmd.Args(cmd, n(req)); err != nil {
			t.Errorf("%v: %d arguments refused: %v", mc.Path, req, err)
		}
		if req > 0 && cmd.Args(cmd, n(req-1)) == nil {
			t.Errorf("%v: %d arguments accepted, the manifest requires %d", mc.Path, req-1, req)
		}
		if max >= 0 {
			if err := cmd.Args(cmd, n(max)); err != nil {
				t.Errorf("%v: %d arguments refused: %v", mc.Path, max, err)
			}
			if cmd.Args(cmd, n(max+1)) == nil {
				t.Errorf("%v: %d arguments accepted, the manifest allows %d", mc.Path, max+1, max)
			}
		}
	}
}

func manifestOf(t *testing.T) CommandManifest {
	t.Helper()
	var m CommandManifest
	b, err := Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
