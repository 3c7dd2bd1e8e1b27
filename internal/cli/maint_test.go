package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestGCSaysWhatItSwept: gc's text names the unnamed vaults of a store it
// dropped, and says nothing of them when there were none.
func TestGCSaysWhatItSwept(t *testing.T) {
	var b bytes.Buffer
	gcResult{Vault: "v", GCStats: registry.GCStats{UnnamedSwept: 2}}.human(&b)
	if !strings.Contains(b.String(), "swept 2 unnamed vaults") {
		t.Errorf("gc with 2 swept says %q", b.String())
	}
	b.Reset()
	gcResult{Vault: "v"}.human(&b)
	if strings.Contains(b.String(), "swept") || !strings.HasSuffix(b.String(), "smaller\n") {
		t.Errorf("gc with none swept says %q", b.String())
	}
}
