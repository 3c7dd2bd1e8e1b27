package mountd_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
)

func TestSessionStates(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	if st := f.S.State(); st != mountd.Mounted {
		t.Fatalf("state %v, want mounted", st)
	}
	// fsync commits the write: others see committed state only.
	if err := writeSynced(filepath.Join(f.Mnt, "a"), []byte("x")); err != nil {
		t.Fatal(err)
	}

	// A second read-write mount of the vault is refused, naming the first.
	other := mountd.New(mountd.Options{Home: f.Home, Vault: f.Name, Mountpoint: t.TempDir()})
	err := other.Mount()
	var e *errs.Error
	if !errs.Is(err, errs.VaultLocked) || !errors.As(err, &e) || e.Extra["mountpoint"] != f.Mnt {
		t.Fatalf("second rw mount: %v, want VaultLocked naming %s", err, f.Mnt)
	}
	if other.State() != mountd.Failed {
		t.Errorf("state %v, want failed", other.State())
	}
	if err := mountd.CheckWriter(f.Home, f.Name); !errs.Is(err, errs.VaultLocked) {
		t.Errorf("CheckWriter: %v", err)
	}

	// Read-only mounts may join, see committed state and refuse writes.
	ro := mountOn(t, f.Home, f.Name, t.TempDir(), true)
	if b, err := os.ReadFile(filepath.Join(ro.Mnt, "a")); err != nil || string(b) != "x" {
		t.Errorf("read-only mount reads %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ro.Mnt, "b"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write in a read-only mount: %v, want EROFS", err)
	}

	// Mounting twice on one directory is refused.
	if err := mountd.New(mountd.Options{Home: f.Home, Vault: f.Name, Mountpoint: ro.Mnt, ReadOnly: true}).Mount(); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("mount on a mountpoint: %v, want AlreadyExists", err)
	}

	if err := f.S.Unmount(false); err != nil {
		t.Fatal(err)
	}
	if st := f.S.State(); st != mountd.Unmounted {
		t.Errorf("state %v, want unmounted", st)
	}
	if err := f.S.Unmount(false); err != nil {
		t.Errorf("second unmount: %v", err)
	}
	if mountrec.IsAvfsMount(f.Mnt) {
		t.Error("still mounted")
	}
	if err := mountd.CheckWriter(f.Home, f.Name); err != nil {
		t.Errorf("writer lock still held: %v", err)
	}
}

func TestSessionValidation(t *testing.T) {
	canMount(t)
	h, name := newVault(t, "sqlite")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		vault, mnt string
		kind       errs.Kind
	}{
		{name, file, errs.NotADirectory},
		{name, filepath.Join(file, "nope"), errs.NotFound},
		{"missing", t.TempDir(), errs.VaultNotFound},
		{"../bad", t.TempDir(), errs.InvalidInput},
	} {
		s := mountd.New(mountd.Options{Home: h, Vault: c.vault, Mountpoint: c.mnt})
		if err := s.Mount(); !errs.Is(err, c.kind) {
			t.Errorf("mount %s on %s: %v, want %s", c.vault, c.mnt, err, c.kind)
		}
		if s.State() != mountd.Failed {
			t.Errorf("state %v, want failed", s.State())
		}
		if err := s.Unmount(false); err == nil {
			t.Error("unmount of a failed session succeeded")
		}
	}
	// A failed mount leaves no lock behind.
	ok := mountOn(t, h, name, t.TempDir(), false)
	_ = ok
}

// TestCLIMount runs avfs mount, mounts and unmount as a user would: the
// mount served by its own process.
func TestCLIMount(t *testing.T) {
	home, mnt, doc := cliMount(t)
	pid := int(doc["pid"].(float64))
	if doc["vault"] != "v" || doc["mountpoint"] != mnt || doc["readonly"] != false || pid == os.Getpid() {
		t.Errorf("mount printed %v", doc)
	}
	if !mountrec.IsAvfsMount(mnt) {
		t.Fatal("not mounted after avfs mount returned")
	}
	if err := writeSynced(filepath.Join(mnt, "hello"), []byte("world")); err != nil {
		t.Fatal(err)
	}

	code, doc := avfs(t, home, "mount", "v", t.TempDir())
	if code != 6 || doc["error"] != "VaultLocked" || doc["mountpoint"] != mnt {
		t.Errorf("second rw mount: exit %d %v", code, doc)
	}
	// The serving process is the vault's only writer: CLI writes are
	// refused naming the mountpoint, CLI reads see what the mount wrote.
	code, doc = avfs(t, home, "write", "/other", "x")
	if code != 6 || doc["error"] != "VaultLocked" || doc["mountpoint"] != mnt {
		t.Errorf("CLI write to a mounted vault: exit %d %v", code, doc)
	}
	if code, doc = avfs(t, home, "stat", "/hello"); code != 0 || doc["size"] != float64(5) {
		t.Errorf("CLI read of a mounted vault: exit %d %v", code, doc)
	}
	// Saving a checkpoint keeps the working state as it is: allowed, and
	// the mount goes on writing into the new top layer.
	if code, doc = avfs(t, home, "checkpoint", "save", "while-mounted"); code != 0 {
		t.Errorf("checkpoint save of a mounted vault: %v", doc)
	}
	if err := os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An fsync of a directory persists everything the mount buffers, so
	// other processes reading the vault see the unsynced file's bytes.
	root, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Sync(); err != nil {
		t.Fatal(err)
	}
	root.Close()
	code, doc = avfs(t, home, "checkpoint", "diff", "while-mounted")
	if cs, _ := doc["changes"].([]any); code != 0 || len(cs) != 1 || cs[0].(map[string]any)["size_after"] != float64(1) {
		t.Errorf("diff after a checkpoint of a mounted vault and a directory fsync: %v", doc)
	}
	code, doc = avfs(t, home, "mounts")
	if ms, _ := doc["mounts"].([]any); code != 0 || len(ms) != 1 || ms[0].(map[string]any)["live"] != true {
		t.Errorf("mounts: %v", doc)
	}

	if code, doc = avfs(t, home, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %v", doc)
	}
	if mountrec.IsAvfsMount(mnt) {
		t.Error("still mounted after unmount returned")
	}
	waitFor(t, "the server to exit", func() bool { return !alive(pid) })
	if code, doc = avfs(t, home, "unmount", mnt); code == 0 || doc["error"] != "NotMounted" {
		t.Errorf("second unmount: %v", doc)
	}
	if code, doc = avfs(t, home, "cat", "/hello"); code != 0 {
		t.Errorf("cat after unmount: %v", doc)
	}

	// SIGTERM unmounts and exits.
	code, doc = avfs(t, home, "mount", mnt)
	if code != 0 {
		t.Fatalf("mount: %v", doc)
	}
	pid = int(doc["pid"].(float64))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGTERM to unmount", func() bool { return !alive(pid) && !mountrec.IsAvfsMount(mnt) })
	if _, doc = avfs(t, home, "mounts"); len(doc["mounts"].([]any)) != 0 {
		t.Errorf("record left after SIGTERM: %v", doc)
	}

	// A server killed outright leaves a dead mount that --prune clears.
	code, doc = avfs(t, home, "mount", mnt)
	if code != 0 {
		t.Fatalf("mount: %v", doc)
	}
	pid = int(doc["pid"].(float64))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to die", func() bool { return !alive(pid) })
	_, doc = avfs(t, home, "mounts")
	if ms := doc["mounts"].([]any); len(ms) != 1 || ms[0].(map[string]any)["live"] != false {
		t.Errorf("mounts after SIGKILL: %v", doc)
	}
	if code, doc = avfs(t, home, "mounts", "--prune"); code != 0 || len(doc["mounts"].([]any)) != 0 || len(doc["pruned"].([]any)) != 1 {
		t.Errorf("mounts --prune: %v", doc)
	}
	if mountrec.IsAvfsMount(mnt) {
		t.Error("dead mount still attached after --prune")
	}
	// The vault is writable again and consistent.
	if code, doc = avfs(t, home, "fsck"); code != 0 {
		t.Errorf("fsck: %v", doc)
	}
	if code, doc = avfs(t, home, "mount", mnt, "--readonly"); code != 0 {
		t.Fatalf("remount: %v", doc)
	}
	if code, doc = avfs(t, home, "unmount", mnt); code != 0 {
		t.Errorf("unmount: %v", doc)
	}
}
