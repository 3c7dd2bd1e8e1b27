//go:build linux

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestCopyUpperKeepsEverything: a bounded run's upper, copied off its
// tmpfs into the cache, keeps every name, type, mode, owner, time, xattr,
// hard link, whiteout and overlay marker.
func TestCopyUpperKeepsEverything(t *testing.T) {
	needRoot(t)
	src := filepath.Join(t.TempDir(), "rw")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mountBound(src, 64<<20); err != nil {
		t.Fatal(err)
	}
	defer Unmount(src)
	upper := filepath.Join(src, "upper")
	sampleTree(t, upper)
	if err := unix.Mknod(filepath.Join(upper, "whiteout"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(filepath.Join(upper, "gone"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "tree")
	if err := copyUpper(upper, dst); err != nil {
		t.Fatal(err)
	}
	if d := diffLines(snapshot(t, upper, snapOpts{times: true}), snapshot(t, dst, snapOpts{times: true})); d != "" {
		t.Errorf("the copy differs:\n%s", d)
	}
	if v, err := getXattr(filepath.Join(dst, "gone"), "trusted.overlay.opaque"); err != nil || string(v) != "y" {
		t.Errorf("opaque marker of the copy: %q %v", v, err)
	}
}

// TestRecoverBoundRun: a run of a quota vault whose process died is
// recovered from its tmpfs (ingested, the tmpfs unmounted); one that
// died between mounting its tmpfs and making its upper is taken away,
// mount and all, and the vault is as before.
func TestRecoverBoundRun(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{MaxSizeMB: 10})
	c := newCache(t, Copies)
	ctx := context.Background()
	died := func(id string) *Run {
		r, err := c.Start(ctx, v, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.UpperBound() == 0 {
			t.Fatal("a quota vault's run has no bound")
		}
		if !isMountpoint(filepath.Join(r.Dir, "rw")) {
			t.Fatal("the upper's tmpfs is not mounted")
		}
		r.lease.Release() // the process is gone: nothing holds its lowers
		return r
	}
	r := died("a")
	if err := os.WriteFile(filepath.Join(r.Merged, "f"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := c.Recover(v)
	if err != nil || len(recs) != 1 || !recs[0].Ingested || recs[0].Err != nil {
		t.Fatalf("recover: %v %+v", err, recs)
	}
	if err := v.View(func(tx *vfs.Tx) error { _, err := tx.Resolve("/f", false); return err }); err != nil {
		t.Errorf("the recovered run's /f: %v", err)
	}
	r = died("b")
	if err := Unmount(r.Merged); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{r.upper(), r.work()} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	recs, err = c.Recover(v)
	if err != nil || len(recs) != 1 || recs[0].Ingested || recs[0].Err == nil {
		t.Fatalf("recover of a run that never started: %v %+v", err, recs)
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("the run dir stays: %v", err)
	}
	if m := mountsUnder(c.Root); len(m) != 0 {
		t.Errorf("left mounted: %v", m)
	}
}
