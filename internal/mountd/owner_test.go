package mountd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestOwnerPID checks `avfs mount --owner-pid`: the mount ends when its
// owner dies, even by SIGKILL, with every write persisted and the vault
// writable again.
func TestOwnerPID(t *testing.T) {
	canMount(t)
	home := t.TempDir()
	if code, doc := avfs(t, home, "vault", "create", "v", "--use"); code != 0 {
		t.Fatal(doc)
	}
	owner := exec.Command("sleep", "60")
	if err := owner.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	mnt, _ := mountd.CleanMountpoint(t.TempDir())
	code, doc := avfs(t, home, "mount", "--owner-pid", strconv.Itoa(owner.Process.Pid), mnt)
	if code != 0 {
		t.Fatalf("mount: %v", doc)
	}
	server := int(doc["pid"].(float64))
	if err := os.WriteFile(filepath.Join(mnt, "kept"), []byte("written before the owner died"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mountrec.IsAvfsMount(mnt) {
		t.Fatal("not mounted")
	}
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	waitFor(t, "the mount to end with its owner", func() bool { return !mountrec.IsAvfsMount(mnt) && !alive(server) })
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	if err := mountd.CheckWriter(h, "v"); err != nil {
		t.Errorf("writer lock after the owner died: %v", err)
	}
	v, err := h.Open("v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if b, ok := vaultFile(t, v, "/kept"); !ok || string(b) != "written before the owner died" {
		t.Errorf("vault holds %q, %v", b, ok)
	}
}
