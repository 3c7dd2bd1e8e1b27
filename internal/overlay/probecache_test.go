//go:build linux

package overlay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCachedProbe: a verdict is probed once and then read from its file,
// a refusal included; a file that is corrupt, empty or keyed by another
// kernel, boot, user or filesystem is probed again and rewritten; formats
// keep verdicts of their own.
func TestCachedProbe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layers")
	probes := 0
	ok := func() error { probes++; return nil }
	for range 3 {
		if err := CachedProbe(dir, Trusted, ok); err != nil {
			t.Fatal(err)
		}
	}
	if probes != 1 {
		t.Fatalf("%d probes for three calls, want 1", probes)
	}
	file := filepath.Join(dir, probeFilePrefix+string(Trusted))
	good, err := os.ReadFile(file)
	if err != nil || !strings.HasSuffix(string(good), "\nok") {
		t.Fatalf("the cached verdict: %q %v", good, err)
	}
	for name, content := range map[string]string{
		"empty":       "",
		"no verdict":  strings.SplitN(string(good), "\n", 2)[0],
		"garbage":     "\x00\xff\n\x01",
		"other key":   strings.Replace(string(good), "euid=", "euid=9", 1),
		"bad verdict": strings.Replace(string(good), "\nok", "\nmaybe", 1),
		"no reason":   strings.Replace(string(good), "\nok", "\nno: ", 1),
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		probes = 0
		if err := CachedProbe(dir, Trusted, ok); err != nil || probes != 1 {
			t.Errorf("%s: %d probes (%v), want one", name, probes, err)
		}
		if b, _ := os.ReadFile(file); string(b) != string(good) {
			t.Errorf("%s: not rewritten: %q", name, b)
		}
	}
	// A refusal is cached too, with its reason, per format.
	probes = 0
	no := func() error { probes++; return errors.New("the kernel ignored a whiteout") }
	for range 2 {
		err := CachedProbe(dir, User, no)
		if err == nil || !strings.Contains(err.Error(), "the kernel ignored a whiteout") {
			t.Errorf("a cached refusal: %v", err)
		}
	}
	if probes != 1 {
		t.Errorf("%d probes of a refusal for two calls, want 1", probes)
	}
	if err := CachedProbe(dir, Trusted, ok); err != nil {
		t.Errorf("the user format's refusal reached the trusted one: %v", err)
	}
	ForgetProbe(dir, User)
	probes = 0
	_ = CachedProbe(dir, User, no)
	if probes != 1 {
		t.Errorf("after ForgetProbe: %d probes, want 1", probes)
	}
	// Nothing of the verdicts is taken for a cache entry.
	c := &Cache{Root: dir, Format: Trusted}
	if ents, err := c.Entries(); err != nil || len(ents) != 0 {
		t.Errorf("entries beside the verdicts: %v %v", ents, err)
	}
	if _, err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("Prune removed a verdict: %v", err)
	}
}
