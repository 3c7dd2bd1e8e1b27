//go:build linux

package overlaymount_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestCloseWith: fn runs on the vault the ingest wrote, while the
// workspace still holds the vault's writer lock, and its error is
// CloseWith's; the workspace is gone after.
func TestCloseWith(t *testing.T) {
	tr, h, dir := newWorkspaceHome(t)
	ctx := context.Background()
	ws, err := tr.Start(ctx, transport.Spec{Home: h, Vault: "w", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir(), "f"), []byte("written in the run"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, ok := ws.(transport.Finisher)
	if !ok {
		t.Fatal("an overlay workspace is not a transport.Finisher")
	}
	ran := false
	boom := errors.New("from fn")
	err = f.CloseWith(ctx, func(v *vfs.Vault) error {
		ran = true
		var b []byte
		if err := v.View(func(tx *vfs.Tx) (err error) {
			b, err = tx.ReadFile("/f")
			return err
		}); err != nil || string(b) != "written in the run" {
			t.Errorf("fn reads %q, %v: want the run's write", b, err)
		}
		if other, err := tr.Start(ctx, transport.Spec{Home: h, Vault: "w", Dir: newDir(t)}); !errs.Is(err, errs.VaultLocked) {
			if other != nil {
				_ = other.Close(ctx)
			}
			t.Errorf("a second workspace while fn runs: %v, want VaultLocked", err)
		}
		return boom
	})
	if !ran || !errors.Is(err, boom) {
		t.Errorf("CloseWith: ran %v, %v; want fn run and its error", ran, err)
	}
	again, err := tr.Start(ctx, transport.Spec{Home: h, Vault: "w", Dir: newDir(t)})
	if err != nil {
		t.Fatalf("a workspace after CloseWith: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(again.Dir(), "f")); err != nil || string(b) != "written in the run" {
		t.Errorf("the next workspace shows %q, %v", b, err)
	}
	if err := again.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
