// Package transporttest is the contract every transport passes: a
// workspace shows the vault, a write in it is the vault's once persisted
// and when closed, a read-only workspace refuses writes, a second writer
// is refused, and a start whose context has ended starts nothing. Each
// transport's tests call Run with the transport; the test binary must be
// able to serve (package mounttest's Main, for transports with a server).
package transporttest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Run checks tr against the contract of package transport.
func Run(t *testing.T, tr transport.Transport) {
	ctx := context.Background()
	h, err := registry.Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("w", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Update(func(tx *vfs.Tx) error {
		_, err := tx.WriteFile("/seed", []byte("from the vault"), 0o644)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	v.Close()
	spec := func(readonly bool) transport.Spec {
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return transport.Spec{Home: h, Vault: "w", Dir: dir, ReadOnly: readonly}
	}
	readBeside := func(p string) (string, error) {
		v, err := h.Open("w")
		if err != nil {
			return "", err
		}
		defer v.Close()
		var b []byte
		err = v.View(func(tx *vfs.Tx) (err error) {
			b, err = tx.ReadFile(p)
			return err
		})
		return string(b), err
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s := spec(false)
	if ws, err := tr.Start(cancelled, s); !errs.Is(err, errs.Interrupted) {
		if ws != nil {
			_ = ws.Close(ctx)
		}
		t.Fatalf("Start with an ended context: %v, want Interrupted", err)
	}
	if mountrec.IsMountpoint(s.Dir) {
		t.Fatalf("Start with an ended context left %s mounted", s.Dir)
	}

	ws, err := tr.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = ws.Close(ctx)
		}
	})
	in := ws.Info()
	if ws.Dir() != s.Dir || in.Dir != s.Dir || in.Transport != tr.Name() || in.Vault != "w" || in.ReadOnly {
		t.Errorf("workspace at %s, info %+v; want dir %s, transport %s, vault w, read-write", ws.Dir(), in, s.Dir, tr.Name())
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir(), "seed")); err != nil || string(b) != "from the vault" {
		t.Errorf("the vault's file in the workspace: %q, %v", b, err)
	}
	if _, err := tr.Start(ctx, spec(false)); !errs.Is(err, errs.VaultLocked) {
		t.Errorf("a second read-write workspace of the vault: %v, want VaultLocked", err)
	}

	// Written, not fsynced: Persist makes it the vault's.
	if err := os.WriteFile(filepath.Join(ws.Dir(), "new"), []byte("from the workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ws.Persist(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := readBeside("/new"); err != nil || got != "from the workspace" {
		t.Errorf("after Persist the vault has %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir(), "last"), []byte("before close"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ws.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	if mountrec.IsMountpoint(s.Dir) {
		t.Errorf("%s is still mounted after Close", s.Dir)
	}
	if got, err := readBeside("/last"); err != nil || got != "before close" {
		t.Errorf("after Close the vault has %q, %v", got, err)
	}

	ro, err := tr.Start(ctx, spec(true))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(ctx)
	if !ro.Info().ReadOnly {
		t.Errorf("read-only workspace info %+v", ro.Info())
	}
	if b, err := os.ReadFile(filepath.Join(ro.Dir(), "last")); err != nil || string(b) != "before close" {
		t.Errorf("read-only workspace shows %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ro.Dir(), "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write in a read-only workspace: %v, want EROFS", err)
	}
	if err := ro.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
