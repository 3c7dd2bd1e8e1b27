package avfs

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// TestKindsMatch: each Kind of this package is the name the layers below
// (and the CLI's JSON) use, so a kind converted at the boundary compares
// equal to its constant.
func TestKindsMatch(t *testing.T) {
	for own, in := range map[Kind]errs.Kind{
		NotFound: errs.NotFound, AlreadyExists: errs.AlreadyExists, NotADirectory: errs.NotADirectory,
		NotAFile: errs.NotAFile, NotEmpty: errs.NotEmpty, InvalidPath: errs.InvalidPath,
		InvalidInput: errs.InvalidInput, NameTooLong: errs.NameTooLong, TooManyLinks: errs.TooManyLinks,
		CrossDevice: errs.CrossDevice, PermissionDenied: errs.PermissionDenied, VaultNotFound: errs.VaultNotFound,
		VaultExists: errs.VaultExists, NoActiveVault: errs.NoActiveVault, VaultLocked: errs.VaultLocked,
		VaultHasForks: errs.VaultHasForks, QuotaExceeded: errs.QuotaExceeded, CorruptVault: errs.CorruptVault,
		UnsupportedFormat: errs.UnsupportedFormat, CheckpointNotFound: errs.CheckpointNotFound,
		StorageError: errs.StorageError, IoError: errs.IoError, ConfirmationRequired: errs.ConfirmationRequired,
		Interrupted: errs.Interrupted, FuseUnavailable: errs.FuseUnavailable, StoreUnavailable: errs.StoreUnavailable,
		NotMounted: mountd.NotMounted, MountBusy: mountd.MountBusy, MountFailed: mountd.MountFailed,
		PolicyDenied: proxy.PolicyDenied, ApprovalRequired: proxy.ApprovalRequired,
		ApprovalRejected: proxy.ApprovalRejected, ApprovalExpired: proxy.ApprovalExpired,
		ApprovalUsed: proxy.ApprovalUsed, ApprovalMismatch: proxy.ApprovalMismatch,
		ApprovalForged: proxy.ApprovalForged, ApprovalFromRun: proxy.ApprovalFromRun,
		IsolationUnavailable: sandbox.Unavailable,
	} {
		if string(own) != string(in) {
			t.Errorf("avfs.%s is %q, the layers below say %q", own, own, in)
		}
	}
	for own, in := range map[RunState]string{
		StateCompleted: proxy.StateCompleted, StateTimedOut: proxy.StateTimedOut,
		StateInterrupted: proxy.StateInterrupted, StateDenied: proxy.StateDenied,
		StateAwaitingApproval: proxy.StateAwaitingApproval, StateFailed: proxy.StateFailed,
	} {
		if string(own) != in {
			t.Errorf("run state %q is %q below", own, in)
		}
	}
	if DefaultTimeout != proxy.DefaultTimeout || DefaultGrace != proxy.DefaultGrace || DefaultLinger != proxy.DefaultLinger {
		t.Errorf("defaults %s, %s, %s; the proxy's %s, %s, %s", DefaultTimeout, DefaultGrace, DefaultLinger,
			proxy.DefaultTimeout, proxy.DefaultGrace, proxy.DefaultLinger)
	}
	stages := []Stage{StageRequest, StageClassify, StageCheckpoint, StageMount, StageExecute, StageSummarize, StageReport}
	if len(stages) != len(proxy.Stages) {
		t.Fatalf("%d stages, the proxy times %d", len(stages), len(proxy.Stages))
	}
	for i, s := range proxy.Stages {
		if string(stages[i]) != s {
			t.Errorf("stage %d is %q, the proxy's %q", i, stages[i], s)
		}
	}
}
