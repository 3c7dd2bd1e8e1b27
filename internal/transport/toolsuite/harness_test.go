package toolsuite_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/mounttest"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/transport/fusemount"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestMain lets the test binary serve the FUSE mounts it starts, and
// fails the run when one is left behind.
func TestMain(m *testing.M) { mounttest.Main(m) }

// transports are the transports every suite runs on, each made for one
// test (the overlay's layer cache in the test's own dir). A transport
// this host cannot serve skips.
var transports = []struct {
	name string
	make func(t *testing.T) transport.Transport
}{
	{"fuse", func(t *testing.T) transport.Transport {
		mounttest.CanMount(t)
		return fusemount.New(os.Executable)
	}},
	{"overlay", func(t *testing.T) transport.Transport {
		tr := overlaymount.New(filepath.Join(t.TempDir(), "layers"))
		if err := tr.Available(); err != nil {
			t.Skipf("overlay unavailable here: %v", err)
		}
		return tr
	}},
}

// workspace is a new vault's workspace on one transport.
type workspace struct {
	t    *testing.T
	tr   transport.Transport
	home *registry.Home
	ws   transport.Workspace
	Dir  string
}

// onEach runs fn as a subtest per transport, with a workspace of a new
// vault started for it; the workspace is closed and its vault checked
// when the subtest ends, if fn has not closed it.
func onEach(t *testing.T, fn func(t *testing.T, w *workspace)) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			tr := tc.make(t)
			h, name := mounttest.NewVault(t, "sqlite")
			w := &workspace{t: t, tr: tr, home: h}
			w.start(name)
			t.Cleanup(func() {
				if w.ws != nil {
					w.close()
				}
			})
			fn(t, w)
		})
	}
}

func (w *workspace) start(name string) {
	w.t.Helper()
	dir, err := filepath.EvalSymlinks(w.t.TempDir())
	if err != nil {
		w.t.Fatal(err)
	}
	ws, err := w.tr.Start(context.Background(), transport.Spec{Home: w.home, Vault: name, Dir: dir})
	if err != nil {
		w.t.Fatalf("start a %s workspace: %v", w.tr.Name(), err)
	}
	w.ws, w.Dir = ws, dir
}

// close takes the workspace back (an overlay's ingest) and checks the
// vault: fsck passes, and it holds the tree the workspace showed just
// before. It returns that tree.
func (w *workspace) close() map[string]string {
	w.t.Helper()
	shown := hostTree(w.t, w.Dir)
	err := w.ws.Close(context.Background())
	w.ws = nil
	if err != nil {
		w.t.Fatalf("close the %s workspace: %v", w.tr.Name(), err)
	}
	mounttest.Fsck(w.t, w.home, "v")
	if d := treeDiff(shown, vaultTree(w.t, w.home, "v"), nil); d != "" {
		w.t.Errorf("the vault after the %s workspace closed differs from what it showed (- shown, + vault):\n%s", w.tr.Name(), d)
	}
	return shown
}

// reopen closes the workspace (checking the vault) and starts a new one
// on the same vault.
func (w *workspace) reopen() {
	w.t.Helper()
	w.close()
	w.start("v")
}

// sameTree checks that the vault, once the workspace is closed, holds
// the tree left on the native disk; contents of the paths in volatile
// (slash-separated, relative) may differ, as a git index caching inode
// numbers does.
func (w *workspace) sameTree(native string, volatile ...string) {
	w.t.Helper()
	w.close()
	if d := treeDiff(hostTree(w.t, native), vaultTree(w.t, w.home, "v"), volatile); d != "" {
		w.t.Errorf("the vault after the %s workspace differs from the native disk (- native, + vault):\n%s", w.tr.Name(), d)
	}
}

// sh runs a shell script in dir with a clean, fixed environment and
// returns its output.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C",
		"GIT_AUTHOR_NAME=avfs", "GIT_AUTHOR_EMAIL=avfs@example.com",
		"GIT_COMMITTER_NAME=avfs", "GIT_COMMITTER_EMAIL=avfs@example.com",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s:\n%s\n%v\n%s", dir, script, err, out)
	}
	return string(out)
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// sameOnNative runs script in the workspace and in a native dir,
// compares the outputs, and checks the vault holds the native tree.
func sameOnNative(t *testing.T, w *workspace, script string, volatile ...string) {
	t.Helper()
	native := t.TempDir()
	got := sh(t, w.Dir, script)
	want := sh(t, native, script)
	if got != want {
		t.Errorf("%s workspace and native disk differ\n--- workspace:\n%s\n--- native:\n%s", w.tr.Name(), got, want)
	}
	w.sameTree(native, volatile...)
}

// hostTree describes every entry under root by its relative path: type,
// permissions, and a symlink's target or a file's size and SHA-256.
// Times, owners and inode numbers are left out: they differ between two
// runs of the same work.
func hostTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = "symlink " + target
		case d.IsDir():
			out[filepath.ToSlash(rel)] = fmt.Sprintf("dir %o", perm)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = fmt.Sprintf("file %o %d %x", perm, len(b), sha256.Sum256(b))
		default:
			out[filepath.ToSlash(rel)] = fmt.Sprintf("special %v", d.Type())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// vaultTree is hostTree of the vault's working state, read beside the
// workspace.
func vaultTree(t *testing.T, h *registry.Home, name string) map[string]string {
	t.Helper()
	v, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	out := map[string]string{}
	var walk func(tx *vfs.Tx, dir vfs.Ino, rel string) error
	walk = func(tx *vfs.Tx, dir vfs.Ino, rel string) error {
		ents, err := tx.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := path.Join(rel, e.Name)
			a, err := tx.GetAttr(e.Ino)
			if err != nil {
				return err
			}
			perm := a.Mode & 0o7777
			switch a.Type {
			case vfs.TypeSymlink:
				target, err := tx.Readlink(e.Ino)
				if err != nil {
					return err
				}
				out[p] = "symlink " + target
			case vfs.TypeDir:
				out[p] = fmt.Sprintf("dir %o", perm)
				if err := walk(tx, e.Ino, p); err != nil {
					return err
				}
			case vfs.TypeFile:
				b := make([]byte, a.Size)
				if _, err := tx.Read(e.Ino, 0, b); err != nil {
					return err
				}
				out[p] = fmt.Sprintf("file %o %d %x", perm, len(b), sha256.Sum256(b))
			default:
				out[p] = fmt.Sprintf("special %v", a.Type)
			}
		}
		return nil
	}
	if err := v.View(func(tx *vfs.Tx) error { return walk(tx, vfs.RootIno, "") }); err != nil {
		t.Fatalf("read the vault: %v", err)
	}
	return out
}

// treeDiff lists the entries where want and got differ, "" when none;
// a file in volatile may differ in its content.
func treeDiff(want, got map[string]string, volatile []string) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		w, g := want[k], got[k]
		if w == g || slices.Contains(volatile, k) && strings.HasPrefix(w, "file ") && strings.HasPrefix(g, "file ") {
			continue
		}
		if b.Len() > 4000 {
			b.WriteString("...\n")
			break
		}
		fmt.Fprintf(&b, "- %s %s\n+ %s %s\n", k, w, k, g)
	}
	return b.String()
}
