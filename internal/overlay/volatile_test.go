//go:build linux

package overlay

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestRunIsVolatile: a volatile cache's read-write run skips syncing its
// upper (the mount's options say volatile) and its pending.json names the
// boot it runs in; a read-only run has no upper to skip, and a cache that
// is not volatile (an `avfs mount`) syncs as usual.
func TestRunIsVolatile(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, Copies)
	c.Volatile = true
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	run, err := c.Start(context.Background(), v, "rw", "")
	if err != nil {
		t.Fatal(err)
	}
	opts := mountOptions(t, run.Merged)
	b, err := os.ReadFile(filepath.Join(run.Dir, "pending.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p pending
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Finish(v); err != nil {
		t.Fatal(err)
	}
	// Newer kernels spell the option fsync=volatile.
	if o := "," + opts + ","; !strings.Contains(o, ",volatile,") && !strings.Contains(o, ",fsync=volatile,") {
		t.Errorf("a read-write run mounted with %q, want volatile", opts)
	}
	if p.BootID == "" || p.BootID != currentBoot() {
		t.Errorf("pending.json names boot %q, want the current %q", p.BootID, currentBoot())
	}
	ro, err := c.StartReadOnly(context.Background(), v, "ro", "")
	if err != nil {
		t.Fatal(err)
	}
	opts = mountOptions(t, ro.Merged)
	if err := ro.Discard(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(opts, "volatile") {
		t.Errorf("a read-only run mounted with %q", opts)
	}
	c.Volatile = false
	kept, err := c.Start(context.Background(), v, "kept", "")
	if err != nil {
		t.Fatal(err)
	}
	opts = mountOptions(t, kept.Merged)
	if _, err := kept.Finish(v); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(opts, "volatile") {
		t.Errorf("a run of a cache that is not volatile mounted with %q", opts)
	}
}

// TestRecoverDropsRunOfEndedBoot: a run left by a boot that has ended
// (its upper was never synced) is dropped whole with an error saying
// so, and the vault stays as before the run; a run left in this boot is
// ingested as before.
func TestRecoverDropsRunOfEndedBoot(t *testing.T) {
	needRoot(t)
	for _, sameBoot := range []bool{false, true} {
		v, _ := newVault(t, vfs.Quota{})
		c := newCache(t, Copies)
		c.Volatile = true
		src := t.TempDir()
		sampleTree(t, src)
		importDir(t, v, src)
		before := snapshot(t, materializeTo(t, v), snapOpts{times: true})
		run, err := c.Start(context.Background(), v, "crashed", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run.Merged, "new"), []byte("written before the crash"), 0o644); err != nil {
			t.Fatal(err)
		}
		after := snapshot(t, run.Merged, snapOpts{times: true})
		if err := Unmount(run.Merged); err != nil { // the host goes down here
			t.Fatal(err)
		}
		run.mounted = false
		run.lease.Release()
		if !sameBoot {
			pj := filepath.Join(run.Dir, "pending.json")
			b, err := os.ReadFile(pj)
			if err != nil {
				t.Fatal(err)
			}
			var p map[string]any
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			p["boot_id"] = "a-boot-that-has-ended"
			b, _ = json.Marshal(p)
			if err := os.WriteFile(pj, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := c.Recover(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 {
			t.Fatalf("same boot %v: recovered %+v, want one run", sameBoot, recs)
		}
		want, got := after, snapshot(t, materializeTo(t, v), snapOpts{times: true})
		if !sameBoot {
			want = before
			if !errs.Is(recs[0].Err, errs.IoError) || recs[0].Ingested || !strings.Contains(recs[0].Err.Error(), "restarted") {
				t.Errorf("a run of an ended boot recovered as %+v", recs[0])
			}
		} else if recs[0].Err != nil || !recs[0].Ingested {
			t.Errorf("a run of this boot recovered as %+v", recs[0])
		}
		if d := diffLines(want, got); d != "" {
			t.Errorf("same boot %v: the vault after Recover:\n%s", sameBoot, d)
		}
		if pend := c.Pending(v.ID()); len(pend) != 0 {
			t.Errorf("same boot %v: pending after Recover: %v", sameBoot, pend)
		}
		checkFsck(t, v)
	}
}

// mountOptions are the per-superblock options of the mount at dir.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == dir {
			return f[len(f)-1]
		}
	}
	t.Fatalf("%s is not mounted", dir)
	return ""
}
