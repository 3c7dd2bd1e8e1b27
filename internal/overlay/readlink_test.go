//go:build linux

package overlay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestReadlinkAsTheVault: Readlink of a host tree answers what the vault
// holding the same tree answers (vfs.Tx.Resolve without following the
// last name, then Readlink), through absolute links, links to "..",
// chains, dangling links and names that are no links.
func TestReadlinkAsTheVault(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"d/e", "x"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "d/f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"a":     ".",     // a/a/a is the root
		"abs":   "/d",    // absolute: the vault's /d, not the host's
		"up":    "../..", // climbs no higher than the root
		"d/e/l": "../f",
		"chain": "abs/e",
		"dang":  "nowhere",
		"etc":   "/etc", // itself: a loop, not the host's /etc
		"x/in":  "/x/in2",
	}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := newVault(t, vfs.Quota{})
	importDir(t, v, root)
	for _, p := range []string{
		"/", "/a", "/a/a/a", "/a/abs", "/abs", "/abs/e/l", "/chain", "/chain/l", "/up", "/up/a",
		"/up/up/d/e/l", "/d/f", "/d", "/dang", "/dang/x", "/etc", "/etc/passwd", "/x/in",
		"/missing", "/d/f/g", "/a/../abs", "/d/e/../../a",
	} {
		want, wantOK := vaultReadlink(t, v, p)
		got, ok, err := Readlink(root, p)
		if err != nil {
			t.Errorf("Readlink(%q): %v", p, err)
			continue
		}
		if got != want || ok != wantOK {
			t.Errorf("Readlink(%q) = %q, %v; the vault says %q, %v", p, got, ok, want, wantOK)
		}
	}
}

func vaultReadlink(t *testing.T, v *vfs.Vault, p string) (string, bool) {
	t.Helper()
	var target string
	var ok bool
	err := v.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, false)
		if err != nil || a.Type != vfs.TypeSymlink {
			return nil
		}
		target, err = tx.Readlink(a.Ino)
		ok = err == nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return target, ok
}
