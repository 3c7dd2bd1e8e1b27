//go:build linux

package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// needRoot skips tests that mount overlays where this process cannot.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlay mounts need root")
	}
	if err := Probe(t.TempDir(), Trusted); err != nil {
		t.Skipf("overlayfs unavailable: %v", err)
	}
}

// newVault makes a SQLite vault in a temp dir, fsck'd when the test ends.
func newVault(t testing.TB, quota vfs.Quota) (*vfs.Vault, string) {
	t.Helper()
	v, path := newVaultFile(t, quota)
	t.Cleanup(func() {
		checkFsck(t, v)
		v.Close()
	})
	return v, path
}

// newVaultFile makes a SQLite vault in a temp dir; the caller closes it.
func newVaultFile(t testing.TB, quota vfs.Quota) (*vfs.Vault, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.avfs")
	eng, err := engines.Create(path, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	v, err := vfs.Create(eng, "v", quota)
	if err != nil {
		t.Fatal(err)
	}
	return v, path
}

func checkFsck(t testing.TB, v *vfs.Vault) {
	t.Helper()
	r, err := v.Fsck()
	if err != nil {
		t.Errorf("fsck: %v", err)
		return
	}
	if !r.OK() {
		t.Errorf("fsck problems: %v", r.Problems)
	}
}

// importDir writes a plain host tree into v's working state: a tree with
// no whiteouts is an upper dir over nothing.
func importDir(t testing.TB, v *vfs.Vault, dir string) {
	t.Helper()
	if _, err := v.UpdateSealed(func(tx *vfs.Tx) error {
		_, err := Ingest(tx, dir, Trusted)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// materializeTo writes v's working state into a new dir and returns it.
func materializeTo(t testing.TB, v *vfs.Vault) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := v.View(func(tx *vfs.Tx) error {
		_, err := Materialize(context.Background(), tx, dir)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

type snapOpts struct{ times bool }

// snapshot describes every name under root, one line each, in path
// order: type, mode, owner, size, content hash or target or rdev, the
// user xattrs, the hard link group, and with times the mtime.
func snapshot(t testing.TB, root string, o snapOpts) []string {
	t.Helper()
	var out []string
	first := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		typ := st.Mode & unix.S_IFMT
		line := fmt.Sprintf("%s %o %o %d:%d", rel, typ>>12, st.Mode&0o7777, st.Uid, st.Gid)
		if typ == unix.S_IFLNK {
			line = fmt.Sprintf("%s %o %d:%d", rel, typ>>12, st.Uid, st.Gid)
		}
		switch typ {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			line += fmt.Sprintf(" size=%d %s", len(b), hex.EncodeToString(s[:6]))
			if st.Nlink > 1 {
				k := [2]uint64{uint64(st.Dev), st.Ino}
				if f, ok := first[k]; ok {
					line += " link=" + f
				} else {
					first[k] = rel
				}
			}
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case unix.S_IFCHR, unix.S_IFBLK:
			line += fmt.Sprintf(" rdev=%d", st.Rdev)
		}
		names, _ := listXattrs(p)
		slices.Sort(names)
		for _, n := range names {
			if strings.HasPrefix(n, "user.") && !isOverlayXattr(n) {
				v, _ := getXattr(p, n)
				line += fmt.Sprintf(" %s=%q", n, v)
			}
		}
		if o.times && typ != unix.S_IFDIR {
			line += fmt.Sprintf(" mtime=%d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffLines(a, b []string) string {
	var sb strings.Builder
	ma := map[string]bool{}
	for _, l := range a {
		ma[l] = true
	}
	mb := map[string]bool{}
	for _, l := range b {
		mb[l] = true
		if !ma[l] {
			fmt.Fprintf(&sb, "+ %s\n", l)
		}
	}
	for _, l := range a {
		if !mb[l] {
			fmt.Fprintf(&sb, "- %s\n", l)
		}
	}
	return sb.String()
}

// mounts lists the overlay mounts under dir, for tests that must leave none.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}

// layouts are the cache's layouts; the cache's tests run on each.
var layouts = []Layout{Copies, Shared}

// forLayouts runs test once per layout, as a subtest named after it.
func forLayouts(t *testing.T, test func(t *testing.T, l Layout)) {
	for _, l := range layouts {
		t.Run(string(l), func(t *testing.T) { test(t, l) })
	}
}

// snapshotStack describes what a stack of lowers (and data layers) shows,
// through a read-only mount of it: a Shared tree holds stubs whose data
// only a mount finds.
func snapshotStack(t testing.TB, lowers, data []string, o snapOpts) []string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"u", "w", "m"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := filepath.Join(dir, "m")
	if err := Mount(Stack{Lowers: lowers, Data: data, Upper: filepath.Join(dir, "u"), Work: filepath.Join(dir, "w"), Format: Trusted, ReadOnly: true}, m); err != nil {
		t.Fatal(err)
	}
	defer Unmount(m)
	return snapshot(t, m, o)
}
