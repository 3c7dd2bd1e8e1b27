// Package mounttest is what the mount tests of packages fusefs and mountd
// share: a test binary that doubles as the avfs command, vaults mounted on
// temporary directories and checked with fsck when unmounted, and a run
// that fails when it leaves a mount behind.
package mounttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/cli"
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Fixture is a vault in its own home, mounted on a temporary directory.
type Fixture struct {
	Home *registry.Home
	Name string
	Mnt  string
	S    *mountd.Session
}

type LogWriter struct{ T testing.TB }

// Main fails the run when a test leaves an avfs mount behind under its
// temporary directory, and detaches it so the machine stays clean.
//
// The test binary doubles as the avfs command (AVFS_TEST_AS_CLI=1), so
// `avfs mount` started in-process re-executes it to serve a mount.
func Main(m *testing.M) {
	if os.Getenv("AVFS_TEST_AS_CLI") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv("AVFS_TEST_AS_CLI", "1")
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	// Every test directory lives under a root of this run's own, so the
	// check below sees this run's mounts only, never another run's or a
	// person's own under /tmp.
	root, err := os.MkdirTemp("", "avfs-mount-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", root)
	code := m.Run()
	if left := mountrec.AvfsMountsUnder(root); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: avfs mounts left behind: %v\n", left)
		for _, d := range left {
			_ = syscall.Unmount(d, syscall.MNT_DETACH)
		}
		code = 1
	}
	_ = os.RemoveAll(root)
	os.Exit(code)
}

// CanMount skips tests that need FUSE where it is missing.
func CanMount(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

func NewVault(t testing.TB, engine string) (*registry.Home, string) {
	t.Helper()
	h, err := registry.Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("v", registry.CreateOptions{Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	return h, "v"
}

// MountVault mounts a new vault of the given engine and unmounts it at
// the end of the test, then checks the vault with Fsck.
func MountVault(t testing.TB, engine string, readonly bool) *Fixture {
	t.Helper()
	CanMount(t)
	h, name := NewVault(t, engine)
	return MountOn(t, h, name, t.TempDir(), readonly)
}

func MountOn(t testing.TB, h *registry.Home, name, mnt string, readonly bool) *Fixture {
	t.Helper()
	s := mountd.New(mountd.Options{Home: h, Vault: name, Mountpoint: mnt, ReadOnly: readonly, Log: LogWriter{T: t}})
	if err := s.Mount(); err != nil {
		t.Fatalf("mount: %v", err)
	}
	f := &Fixture{Home: h, Name: name, Mnt: s.Mountpoint(), S: s}
	t.Cleanup(func() {
		UnmountEventually(t, s)
		Fsck(t, h, name)
	})
	return f
}

// UnmountEventually unmounts s, retrying while a test's stray file
// descriptor keeps it busy, and detaching it as a last resort.
func UnmountEventually(t testing.TB, s *mountd.Session) {
	t.Helper()
	for i := 0; i < 100; i++ {
		err := s.Unmount(false)
		if err == nil {
			return
		}
		if !errs.Is(err, mountd.MountBusy) {
			t.Errorf("unmount: %v", err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Unmount(true); err != nil {
		t.Errorf("lazy unmount: %v", err)
	}
}

func Fsck(t testing.TB, h *registry.Home, name string) {
	t.Helper()
	v, err := h.Open(name)
	if err != nil {
		t.Errorf("reopen for Fsck: %v", err)
		return
	}
	defer v.Close()
	r, err := v.Fsck()
	if err != nil {
		t.Errorf("fsck: %v", err)
		return
	}
	if !r.OK() {
		t.Errorf("fsck problems: %v", r.Problems)
	}
}

// WriteSynced writes a file and fsyncs it: the mount buffers writes, and
// other readers of the vault see them once they are committed.
func WriteSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(string(p))
	return len(p), nil
}

// AVFS runs the command line in-process with home as $AVFS_HOME.
func AVFS(t *testing.T, home string, args ...string) (int, map[string]any) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), append(args, "--json"), cli.Env{
		Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "AVFS_HOME" {
				return home
			}
			return ""
		},
	})
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("avfs %v: %v\n%s%s", args, err, out.String(), errOut.String())
	}
	return code, doc
}

func Alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// CLIMount creates vault v as the current vault of a new home and mounts
// it with `avfs mount`, served by its own process; the mount is detached
// when the test ends. It returns the home, the mountpoint and what mount printed.
func CLIMount(t *testing.T) (home, mnt string, doc map[string]any) {
	t.Helper()
	CanMount(t)
	home = t.TempDir()
	if code, doc := AVFS(t, home, "vault", "create", "v", "--use"); code != 0 {
		t.Fatal(doc)
	}
	mnt, _ = mountd.CleanMountpoint(t.TempDir())
	code, doc := AVFS(t, home, "mount", mnt)
	if code != 0 {
		t.Fatalf("mount: %v", doc)
	}
	t.Cleanup(func() {
		if mountrec.IsAvfsMount(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return home, mnt, doc
}

// VaultFile reads a file of the vault as committed, through the mounted
// session's own vault handle.
func VaultFile(t *testing.T, v *vfs.Vault, path string) ([]byte, bool) {
	t.Helper()
	var data []byte
	found := true
	err := v.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(path, true)
		if err != nil {
			found = false
			return nil
		}
		data = make([]byte, a.Size)
		_, err = tx.Read(a.Ino, 0, data)
		return err
	})
	if err != nil {
		t.Fatalf("vault read %s: %v", path, err)
	}
	return data, found
}
