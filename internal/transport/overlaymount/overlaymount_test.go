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
