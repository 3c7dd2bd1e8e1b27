//go:build linux

package overlaymount_test

import (
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
)

// newWorkspaceHome is an overlay transport with a cache of its own and a
// home holding an empty vault "w" (the test skips where overlays do not
// mount), and a dir to start a workspace at (symlinks resolved, as the
// transport wants it).
func newWorkspaceHome(t *testing.T) (*overlaymount.Transport, *registry.Home, string) {
	t.Helper()
	tr := overlaymount.New(filepath.Join(t.TempDir(), "layers"))
	if err := tr.Available(); err != nil {
		t.Skipf("overlay unavailable here: %v", err)
	}
	h, err := registry.Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("w", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	return tr, h, newDir(t)
}

// newDir is a new empty dir, symlinks resolved.
func newDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
