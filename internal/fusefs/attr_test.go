package fusefs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Permissions and attributes as the kernel sees them through the mount.

// nobody is the uid and gid the tests act as "another user" with.
const nobody = 65534

// reachable lets other users walk down to dir: test directories are made
// 0700, and a mount's permissions are only tested once others can reach it.
func reachable(t *testing.T, dir string) {
	t.Helper()
	top := filepath.Clean(os.TempDir())
	for d := filepath.Dir(dir); strings.HasPrefix(d, top) && d != filepath.Dir(top); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// asNobody runs a command as uid and gid 65534 and returns its error and
// output.
func asNobody(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestModeZero: a mode of 0000 reaches the kernel as 0000, and the kernel
// refuses another user what the mode refuses (go-fuse shows a zero mode as
// 0644 or 0755 unless told not to; pjdfstest open/26.t).
func TestModeZero(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	reachable(t, f.Mnt)
	if err := os.Chmod(f.Mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(f.Mnt, "secret")
	dir := filepath.Join(f.Mnt, "dir")
	fifo := filepath.Join(f.Mnt, "fifo")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inside"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// What another user may do while the modes allow it: the control, so
	// the refusals below are the modes' and not an unreachable mount's.
	if out, err := asNobody(t, "cat", secret); err != nil || out != "secret\n" {
		t.Fatalf("nobody cat of a 0644 file: %v %q", err, out)
	}
	if out, err := asNobody(t, "ls", dir); err != nil || out != "inside\n" {
		t.Fatalf("nobody ls of a 0755 directory: %v %q", err, out)
	}
	for _, p := range []string{secret, dir, fifo} {
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{secret, dir, fifo} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); perm != 0 {
			t.Errorf("%s: mode %v after chmod 000", filepath.Base(p), fi.Mode())
		}
	}
	if out, err := asNobody(t, "cat", secret); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("nobody read a 0000 file: %v %q", err, out)
	}
	if out, err := asNobody(t, "ls", dir); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("nobody listed a 0000 directory: %v %q", err, out)
	}
	if out, err := asNobody(t, "sh", "-c", "echo x > "+fifo); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("nobody opened a 0000 fifo: %v %q", err, out)
	}
}

// statOf is lstat's attributes that a program compares to see a change.
type statOf struct {
	Mode, Nlink, Uid, Gid uint32
	Size                  int64
	Mtime, Ctime          syscall.Timespec
}

func lstat(t *testing.T, p string) statOf {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return statOf{st.Mode, uint32(st.Nlink), st.Uid, st.Gid, st.Size, st.Mtim, st.Ctim}
}

func fstat(t *testing.T, fd *os.File) statOf {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return statOf{st.Mode, uint32(st.Nlink), st.Uid, st.Gid, st.Size, st.Mtim, st.Ctim}
}

// vaultStat is the same attributes as the vault holds them.
func vaultStat(t *testing.T, v *vfs.Vault, p string) statOf {
	t.Helper()
	var a vfs.Attr
	if err := v.View(func(tx *vfs.Tx) (err error) {
		a, err = tx.Resolve(p, false)
		return err
	}); err != nil {
		t.Fatalf("vault %s: %v", p, err)
	}
	ts := func(tm time.Time) syscall.Timespec { return syscall.NsecToTimespec(tm.UnixNano()) }
	var fa statOf
	fa.Mode = a.Mode & 0o7777
	switch a.Type {
	case vfs.TypeFile:
		fa.Mode |= syscall.S_IFREG
	case vfs.TypeDir:
		fa.Mode |= syscall.S_IFDIR
	case vfs.TypeSymlink:
		fa.Mode |= syscall.S_IFLNK
	}
	fa.Nlink, fa.Uid, fa.Gid, fa.Size = a.Nlink, a.Uid, a.Gid, int64(a.Size)
	fa.Mtime, fa.Ctime = ts(a.Mtime), ts(a.Ctime)
	return fa
}

// persist has the mount persist everything it buffers, as its background
// persister does a second after the last write: the fsync of a directory
// persists every buffered file and commits (writeback.fsyncAll).
func persist(t *testing.T, mnt string) {
	t.Helper()
	d, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestReadKeepsAttrs: a read never changes what fstat says, also when the
// file was persisted between the write and the read (the kernel asks for
// the attributes again after every read, to learn the atime).
func TestReadKeepsAttrs(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	p := filepath.Join(f.Mnt, "obj")
	data := bytes.Repeat([]byte("object "), 10000)
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	before := fstat(t, fd)
	persist(t, f.Mnt)
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	if after := fstat(t, fd); after != before {
		t.Errorf("a read changed the attributes:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestCachedAttrsMatchVault: after writes, chmod, rename and link of files
// still buffered, what the kernel was told (and caches) is what the vault
// reports once everything is persisted.
func TestCachedAttrsMatchVault(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	at := func(name string) string { return filepath.Join(f.Mnt, name) }
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(at(name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	step := func() { time.Sleep(20 * time.Millisecond) } // distinct ctimes
	write("chmod", "written, then chmod")
	step()
	if err := os.Chmod(at("chmod"), 0o600); err != nil {
		t.Fatal(err)
	}
	write("renamed.tmp", "written, then renamed")
	step()
	if err := os.Rename(at("renamed.tmp"), at("renamed")); err != nil {
		t.Fatal(err)
	}
	write("linked.tmp", "written, linked, then unlinked")
	step()
	if err := os.Link(at("linked.tmp"), at("linked")); err != nil {
		t.Fatal(err)
	}
	write("both", "written, then linked")
	step()
	if err := os.Link(at("both"), at("both2")); err != nil {
		t.Fatal(err)
	}
	step()
	if err := os.Remove(at("linked.tmp")); err != nil {
		t.Fatal(err)
	}
	write("touched", "written, then utimes in the past")
	step()
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(at("touched"), past, past); err != nil {
		t.Fatal(err)
	}
	write("future", "written, then utimes in the future")
	step()
	future := time.Now().Add(24 * time.Hour)
	if err := os.Chtimes(at("future"), future, future); err != nil {
		t.Fatal(err)
	}
	write("chmodwrite", "chmod")
	if err := os.Chmod(at("chmodwrite"), 0o600); err != nil {
		t.Fatal(err)
	}
	step()
	fd, err := os.OpenFile(at("chmodwrite"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fd.WriteString(", then written"); err != nil {
		t.Fatal(err)
	}
	fd.Close()
	names := []string{"chmod", "renamed", "linked", "both", "both2", "touched", "future", "chmodwrite"}
	seen := map[string]statOf{}
	for _, n := range names {
		seen[n] = lstat(t, at(n))
	}
	// The same before and after the write-back persists them.
	persist(t, f.Mnt)
	for _, n := range names {
		if now := lstat(t, at(n)); now != seen[n] {
			t.Errorf("%s changed while nothing changed it:\nbefore %+v\nafter  %+v", n, seen[n], now)
		}
	}
	if err := f.S.Unmount(false); err != nil {
		t.Fatal(err)
	}
	v, err := f.Home.Open(f.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, n := range names {
		if got := vaultStat(t, v, "/"+n); got != seen[n] {
			t.Errorf("%s: the kernel was told\n%+v\nthe vault holds\n%+v", n, seen[n], got)
		}
	}
}

// TestTarAfterGit: tar of a repository git has just written in the mount
// finds no file that changed while it read it.
func TestTarAfterGit(t *testing.T) {
	need(t, "git", "tar")
	f := mountVault(t, "sqlite", false)
	sh(t, f.Mnt, `
git init -q -b main repo
cd repo
for i in 1 2 3 4 5 6 7 8; do echo "file $i" > f$i.txt; done
git add -A
git commit -q -m first
`)
	persist(t, f.Mnt) // objects persisted after git stat'ed them
	out := filepath.Join(t.TempDir(), "repo.tar")
	sh(t, f.Mnt, "tar cf "+out+" repo")
}
