package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/fsynctest"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestFlushFailureStopsTheStep: a checkpoint or summary taken beside a
// live read-write mount first has the mount persist its writes
// (mountd.Persist: the server's "flush", or an fsync of its root for a
// mount without a control socket, as here). When that fails, or the
// mounts cannot be listed, the step fails instead of reading a vault that
// lacks those writes.
func TestFlushFailureStopsTheStep(t *testing.T) {
	s := fsynctest.Mount(t) // stands in for the mount: its root's fsync can fail
	h, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("v", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	// The record of a live read-write mount of v at s.Dir, its lock held
	// as its server holds it.
	dir := filepath.Join(h.Dir, "mounts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(mountrec.Info{Vault: "v", Mountpoint: s.Dir, PID: os.Getpid()})
	rec := filepath.Join(dir, "0000000000000000.json")
	if err := os.WriteFile(rec, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	rt := &Runtime{Home: h}
	ran := false
	step := func(*vfs.Vault) error { ran = true; return nil }
	s.Fail(true)
	err = rt.inVault("v", "", opCheckpoint, nil, nil, step)
	s.Fail(false)
	if !errs.Is(err, errs.IoError) || ran {
		t.Fatalf("a mount whose fsync fails: err %v, step ran %v; want IoError and no step", err, ran)
	}
	if err := rt.inVault("v", "", opCheckpoint, nil, nil, step); err != nil || !ran || s.DirSyncs("") != 2 {
		t.Fatalf("a mount that syncs: err %v, step ran %v, %d fsyncs of its root; want the step after the fsync", err, ran, s.DirSyncs(""))
	}

	// Mounts that cannot be listed.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ran = false
	if err := rt.inVault("v", "", opCheckpoint, nil, nil, step); !errs.Is(err, errs.IoError) || ran {
		t.Fatalf("mounts that cannot be listed: err %v, step ran %v; want IoError and no step", err, ran)
	}
}
