package policy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// TestSandboxTable: [sandbox] merges as documented: the defaults, the
// home's lists, and a vault's that can only hide more, make more
// read-only and keep fewer writable dirs.
func TestSandboxTable(t *testing.T) {
	home := t.TempDir()
	p, err := Load(home, "v")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Sandbox.Writable, DefaultWritable) || len(p.Sandbox.Hide) != 0 {
		t.Fatalf("defaults: %+v", p.Sandbox)
	}
	writeFile(t, filepath.Join(home, FileName), `version = 1
[sandbox]
hide = ["~/work/secrets"]
read_only = [".git/hooks"]
writable = ["$GOCACHE", "~/.m2"]
`)
	writeFile(t, filepath.Join(home, VaultDir, "v.toml"), `version = 1
[sandbox]
hide = ["/srv/data"]
read_only = ["~/.m2/settings.xml"]
writable = ["~/.m2/repository", "/var/tmp/x", "$GOCACHE"]
`)
	p, err = Load(home, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Sandbox.Writable, []string{"$GOCACHE", "~/.m2"}) || !slices.Equal(p.Sandbox.Hide, []string{"~/work/secrets"}) {
		t.Errorf("home: %+v", p.Sandbox)
	}
	vp, err := Load(home, "v")
	if err != nil {
		t.Fatal(err)
	}
	want := Sandbox{Hide: []string{"~/work/secrets", "/srv/data"}, ReadOnly: []string{".git/hooks", "~/.m2/settings.xml"},
		Writable: []string{"~/.m2/repository", "$GOCACHE"}} // /var/tmp/x is not in the home's list: dropped
	if !slices.Equal(vp.Sandbox.Hide, want.Hide) || !slices.Equal(vp.Sandbox.ReadOnly, want.ReadOnly) || !slices.Equal(vp.Sandbox.Writable, want.Writable) {
		t.Errorf("vault: %+v, want %+v", vp.Sandbox, want)
	}
	// A home that empties the writable list keeps it empty.
	writeFile(t, filepath.Join(home, FileName), "version = 1\n[sandbox]\nwritable = []\n")
	if p, err = Load(home, ""); err != nil || len(p.Sandbox.Writable) != 0 {
		t.Errorf("writable = []: %+v %v", p.Sandbox, err)
	}
}

// TestNetworkRules: a home rule may grant the host's network to the
// runs it decides; a vault's may not, and only "host" and "none" exist.
func TestNetworkRules(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, FileName), `version = 1
[[rule]]
name = "fetch"
program = ["curl"]
action = "allow"
network = "host"
`)
	p, err := Load(home, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := Classify(Request{Argv: []string{"curl", "https://example.com"}}, p); !p.GrantsNetwork(d) {
		t.Errorf("curl under the fetch rule: %+v", d)
	}
	if d := Classify(Request{Shell: "curl https://example.com; python3 x.py"}, p); p.GrantsNetwork(d) {
		t.Errorf("python beside a granted curl got the network: %+v", d)
	}
	if d := Classify(Request{Argv: []string{"wget", "https://example.com"}}, p); p.GrantsNetwork(d) {
		t.Errorf("wget got the network: %+v", d)
	}
	if d := Classify(Request{Argv: []string{"curl", "x"}}, Default()); Default().GrantsNetwork(d) {
		t.Errorf("the default policy grants the network")
	}
	for name, text := range map[string]string{
		"vault grants": "version = 1\n[[rule]]\nprogram = [\"curl\"]\naction = \"allow\"\nnetwork = \"host\"\n",
		"unknown":      "version = 1\n[[rule]]\nprogram = [\"curl\"]\naction = \"allow\"\nnetwork = \"lan\"\n",
		"bad path":     "version = 1\n[sandbox]\nhide = [\"$HOME/x\"]\n",
	} {
		h := t.TempDir()
		path, vault := filepath.Join(h, FileName), ""
		if name == "vault grants" {
			path, vault = filepath.Join(h, VaultDir, "v.toml"), "v"
		}
		writeFile(t, path, text)
		_, err := Load(h, vault)
		if !errs.Is(err, errs.InvalidInput) {
			t.Errorf("%s: %v", name, err)
		} else if !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("%s: the error does not name the file: %v", name, err)
		}
	}
}
