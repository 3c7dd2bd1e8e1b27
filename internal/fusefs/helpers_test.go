package fusefs_test

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/mounttest"
)

// The shared helpers of the mount tests (package mounttest).
var (
	canMount          = mounttest.CanMount
	newVault          = mounttest.NewVault
	mountVault        = mounttest.MountVault
	mountOn           = mounttest.MountOn
	unmountEventually = mounttest.UnmountEventually
	fsck              = mounttest.Fsck
	writeSynced       = mounttest.WriteSynced
	avfs              = mounttest.AVFS
	alive             = mounttest.Alive
	waitFor           = mounttest.WaitFor
	cliMount          = mounttest.CLIMount
	vaultFile         = mounttest.VaultFile
)

type logWriter = mounttest.LogWriter

// TestMain fails the run when a test leaves an avfs mount behind.
func TestMain(m *testing.M) { mounttest.Main(m) }
