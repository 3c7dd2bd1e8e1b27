package fusemount_test

import (
	"os"
	"testing"

	"github.com/agentvfs/agentvfs/internal/mounttest"
	"github.com/agentvfs/agentvfs/internal/transport/fusemount"
	"github.com/agentvfs/agentvfs/internal/transport/transporttest"
)

// TestMain lets the test binary serve the mounts it starts, and fails the
// run when one is left behind.
func TestMain(m *testing.M) { mounttest.Main(m) }

// TestContract: the FUSE transport, served by this test binary as
// `avfs mount --foreground`, passes the transport contract.
func TestContract(t *testing.T) {
	mounttest.CanMount(t)
	transporttest.Run(t, fusemount.New(os.Executable))
}
