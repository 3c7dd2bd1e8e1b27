//go:build linux

package overlaymount_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/transport/transporttest"
)

// TestContract: the overlay transport passes the contract every
// transport passes, in each layout of its cache, and leaves no mount
// behind.
func TestContract(t *testing.T) {
	for _, l := range []overlay.Layout{overlay.Copies, overlay.Shared} {
		t.Run(string(l), func(t *testing.T) { testContract(t, l) })
	}
}

func testContract(t *testing.T, l overlay.Layout) {
	tr := overlaymount.New(filepath.Join(t.TempDir(), "layers"))
	tr.Layout = l
	if err := tr.Available(); err != nil {
		t.Skipf("overlay unavailable here: %v", err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile("/proc/self/mounts")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "overlay ") && strings.Contains(l, tr.Root) {
				t.Errorf("overlay left mounted: %s", l)
			}
		}
	})
	transporttest.Run(t, tr)
}

// TestAvailableCached: the probe's verdict outlives the Transport (a
// process): a new Transport on the same cache reads it and mounts
// nothing, so a planted refusal is what it answers.
func TestAvailableCached(t *testing.T) {
	root := filepath.Join(t.TempDir(), "layers")
	if err := overlaymount.New(root).Available(); err != nil {
		t.Skipf("overlay unavailable here: %v", err)
	}
	file := filepath.Join(root, ".verdict-trusted")
	b, err := os.ReadFile(file)
	if err != nil || !strings.HasSuffix(string(b), "\nok") {
		t.Fatalf("no cached verdict after a probe: %q %v", b, err)
	}
	planted := strings.TrimSuffix(string(b), "ok") + "no: planted refusal"
	if err := os.WriteFile(file, []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := overlaymount.New(root).Available(); err == nil || !strings.Contains(err.Error(), "planted refusal") {
		t.Errorf("a second transport probed again instead of reading the verdict: %v", err)
	}
}

// BenchmarkAvailable: what a run's process pays to learn whether it can
// mount an overlay: a probe (a mount and an unmount) when no verdict is
// cached, a file read when one is.
func BenchmarkAvailable(b *testing.B) {
	root := filepath.Join(b.TempDir(), "layers")
	if err := overlaymount.New(root).Available(); err != nil {
		b.Skipf("overlay unavailable here: %v", err)
	}
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "probe", true: "cached"}[cached]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !cached {
					_ = os.Remove(filepath.Join(root, ".verdict-trusted"))
				}
				if err := overlaymount.New(root).Available(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
