//go:build linux

package overlay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestModelRoundTrip: random operation sequences, run in a few overlay
// runs each ingested into a vault, leave the vault equal to the same
// sequence run on the native disk, and fsck clean. Each run after the
// first stands on the uppers of the ones before.
func TestModelRoundTrip(t *testing.T) { forLayouts(t, testModelRoundTrip) }

func testModelRoundTrip(t *testing.T, l Layout) {
	needRoot(t)
	rapid.Check(t, func(rt *rapid.T) {
		v, _ := newVault(t, vfs.Quota{})
		c := newCache(t, l)
		// A shallow bound makes later runs merge the deltas (or squash).
		c.MaxDepth = rapid.IntRange(1, 3).Draw(rt, "maxDepth")
		native := t.TempDir()
		sampleTree(t, native)
		importDir(t, v, native)
		runs := rapid.IntRange(1, 4).Draw(rt, "runs")
		for r := range runs {
			cp := fmt.Sprintf("cp%d", r)
			if _, err := v.SaveCheckpoint(cp, ""); err != nil {
				rt.Fatal(err)
			}
			run, err := c.Start(context.Background(), v, cp, "")
			if err != nil {
				rt.Fatal(err)
			}
			// rapid ends a case by panicking from Draw, too.
			defer func() {
				if run.mounted {
					run.Discard()
				}
			}()
			n := rapid.IntRange(1, 25).Draw(rt, "ops")
			for range n {
				if err := step(rt, native, run.Merged); err != nil {
					run.Discard()
					rt.Fatal(err)
				}
			}
			if _, err := run.Finish(v); err != nil {
				rt.Fatal(err)
			}
			want := snapshot(t, native, snapOpts{})
			got := snapshot(t, materializeTo(t, v), snapOpts{})
			if d := diffLines(want, got); d != "" {
				rt.Fatalf("run %d: the vault differs from the native disk:\n%s", r, d)
			}
			r, err := v.Fsck()
			if err != nil || !r.OK() {
				rt.Fatalf("fsck: %v %v", err, r)
			}
		}
	})
}

// entries lists the paths below root (relative), and the directories.
func entries(root string) (all, dirs []string) {
	dirs = []string{"."}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		all = append(all, rel)
		if d.IsDir() {
			dirs = append(dirs, rel)
		}
		return nil
	})
	return all, dirs
}

func nlink(p string) uint64 {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return 0
	}
	return uint64(st.Nlink)
}

func isReg(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// hasLinks reports a regular file with several names below p.
func hasLinks(p string) bool {
	found := false
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && nlink(q) > 1 {
			found = true
		}
		return nil
	})
	return found
}

// step draws one operation and runs it on both trees. Operations that
// overlayfs does differently by design are left out: changing a file
// that has several names (copy-up breaks the link) and renaming a tree
// that holds such a file.
func step(rt *rapid.T, native, merged string) error {
	all, dirs := entries(native)
	pick := func(label string, from []string) string {
		if len(from) == 0 {
			return ""
		}
		return rapid.SampledFrom(from).Draw(rt, label)
	}
	name := rapid.StringMatching(`[a-e]{1,3}`).Draw(rt, "name")
	newPath := filepath.Join(pick("dir", dirs), name)
	var files []string
	for _, p := range all {
		if isReg(filepath.Join(native, p)) && nlink(filepath.Join(native, p)) == 1 {
			files = append(files, p)
		}
	}
	op := rapid.SampledFrom([]string{"create", "write", "truncate", "append", "unlink", "mkdir",
		"rmrf", "recreate", "rename", "chmod", "chown", "symlink", "link", "xattr", "fifo"}).Draw(rt, "op")
	var do func(root string) error
	switch op {
	case "create":
		data := rapid.SliceOfN(rapid.Byte(), 0, 3*vfs.ChunkSize).Draw(rt, "data")
		if fi, err := os.Lstat(filepath.Join(native, newPath)); err == nil && (!fi.Mode().IsRegular() || nlink(filepath.Join(native, newPath)) > 1) {
			return nil // a FIFO would block the open; a linked name is copied up alone
		}
		do = func(root string) error { return os.WriteFile(filepath.Join(root, newPath), data, 0o644) }
	case "write", "truncate", "append", "chmod", "chown", "xattr":
		f := pick("file", files)
		if f == "" {
			return nil
		}
		off := rapid.Int64Range(0, 4*vfs.ChunkSize).Draw(rt, "off")
		data := rapid.SliceOfN(rapid.Byte(), 1, 2*vfs.ChunkSize).Draw(rt, "data")
		mode := rapid.Uint32Range(0, 0o777).Draw(rt, "mode")
		uid := rapid.IntRange(0, 3).Draw(rt, "uid")
		do = func(root string) error {
			p := filepath.Join(root, f)
			switch op {
			case "write", "append":
				flags := os.O_RDWR
				if op == "append" {
					flags |= os.O_APPEND
				}
				fh, err := os.OpenFile(p, flags, 0)
				if err != nil {
					return err
				}
				defer fh.Close()
				if op == "append" {
					_, err = fh.Write(data)
				} else {
					_, err = fh.WriteAt(data, off)
				}
				return err
			case "truncate":
				return os.Truncate(p, off)
			case "chmod":
				return os.Chmod(p, os.FileMode(mode))
			case "chown":
				return os.Lchown(p, uid, uid+1)
			}
			return unix.Lsetxattr(p, "user.k", data[:min(len(data), 16)], 0)
		}
	case "unlink":
		p := pick("path", all)
		if p == "" {
			return nil
		}
		do = func(root string) error {
			if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && fi.IsDir() {
				return os.Remove(filepath.Join(root, p))
			}
			return os.Remove(filepath.Join(root, p))
		}
	case "mkdir":
		do = func(root string) error { return os.Mkdir(filepath.Join(root, newPath), 0o755) }
	case "rmrf", "recreate":
		d := pick("dir", dirs[1:])
		if d == "" {
			return nil
		}
		do = func(root string) error {
			if err := os.RemoveAll(filepath.Join(root, d)); err != nil || op == "rmrf" {
				return err
			}
			if err := os.Mkdir(filepath.Join(root, d), 0o711); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, d, "again"), []byte("again"), 0o644)
		}
	case "rename":
		p := pick("path", all)
		if p == "" || nlink(filepath.Join(native, p)) > 1 && isReg(filepath.Join(native, p)) || hasLinks(filepath.Join(native, p)) {
			return nil
		}
		do = func(root string) error { return renameOrCopy(filepath.Join(root, p), filepath.Join(root, newPath)) }
	case "symlink":
		target := pick("target", append(all, "nowhere"))
		do = func(root string) error { return os.Symlink(target, filepath.Join(root, newPath)) }
	case "link":
		f := pick("file", files)
		if f == "" {
			return nil
		}
		do = func(root string) error { return os.Link(filepath.Join(root, f), filepath.Join(root, newPath)) }
	case "fifo":
		do = func(root string) error { return unix.Mkfifo(filepath.Join(root, newPath), 0o600) }
	}
	errN, errM := do(native), do(merged)
	if (errN == nil) != (errM == nil) {
		return fmt.Errorf("%s: native %v, overlay %v", op, errN, errM)
	}
	return nil
}

// renameOrCopy renames like mv: a directory the overlay cannot rename
// (EXDEV, no redirect_dir) is copied, then removed.
func renameOrCopy(from, to string) error {
	err := os.Rename(from, to)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		return unix.EEXIST
	}
	if err := copyTree(from, to); err != nil {
		return err
	}
	return os.RemoveAll(from)
}

func copyTree(from, to string) error {
	var st unix.Stat_t
	if err := unix.Lstat(from, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := os.Mkdir(to, os.FileMode(st.Mode&0o777)); err != nil {
			return err
		}
		des, err := os.ReadDir(from)
		if err != nil {
			return err
		}
		for _, d := range des {
			if err := copyTree(filepath.Join(from, d.Name()), filepath.Join(to, d.Name())); err != nil {
				return err
			}
		}
	case unix.S_IFREG:
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return err
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return copyMeta(from, to, &st, os.Symlink(target, to))
	default:
		if err := unix.Mknod(to, st.Mode, int(st.Rdev)); err != nil {
			return err
		}
	}
	return copyMeta(from, to, &st, nil)
}

func copyMeta(from, to string, st *unix.Stat_t, err error) error {
	if err != nil {
		return err
	}
	names, _ := listXattrs(from)
	for _, n := range names {
		if strings.HasPrefix(n, "user.") {
			v, _ := getXattr(from, n)
			if err := unix.Lsetxattr(to, n, v, 0); err != nil {
				return err
			}
		}
	}
	if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return os.Chmod(to, os.FileMode(st.Mode&0o777)|modeBits(st.Mode))
	}
	return nil
}

func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	for _, b := range [][2]uint64{{unix.S_ISUID, uint64(os.ModeSetuid)}, {unix.S_ISGID, uint64(os.ModeSetgid)}, {unix.S_ISVTX, uint64(os.ModeSticky)}} {
		if uint64(m)&b[0] != 0 {
			out |= os.FileMode(b[1])
		}
	}
	return out
}
