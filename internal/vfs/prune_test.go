package vfs_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Pruning deletes the checkpoints past the newest Keep and older than
// OlderThan, never one a fork stands on or the origin records; the
// chunks only the deleted ones held are freed, and every checkpoint left
// restores exactly.
func TestPruneCheckpoints(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		f.v.SetClock(func() time.Time { return now })
		content := func(i int) string { return strings.Repeat(fmt.Sprintf("state %d ", i), 20000) } // ~160 KB, its own chunks
		var names []string
		for i := range 8 {
			f.write("/big", content(i))
			f.write(fmt.Sprintf("/small-%d", i), "x")
			name := fmt.Sprintf("proxy-run%d", i)
			switch i {
			case 1:
				name = "origin"
			case 6:
				name = "mine"
			}
			if _, err := f.v.SaveCheckpoint(name, ""); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			if i == 3 { // a fork of exactly this state
				child, err := f.v.Fork(engines.NewMemory(), "child", nil)
				if err != nil {
					t.Fatal(err)
				}
				child.Close()
			}
			now = now.Add(24 * time.Hour)
		}
		if err := f.v.SetOrigin(vfs.Origin{HostDir: "/src", Checkpoint: "origin", RecordedAt: now}); err != nil {
			t.Fatal(err)
		}
		f.write("/big", "now")

		want := map[string]string{}
		for _, n := range names {
			want[n] = readIn(t, f.v, n, "/big")
		}
		spaceBefore, err := f.v.Space()
		if err != nil {
			t.Fatal(err)
		}

		if _, err := f.v.PruneCheckpoints(vfs.PruneOptions{Keep: -1}); !errs.Is(err, errs.InvalidInput) {
			t.Fatalf("prune without a rule: %v", err)
		}
		runs := func(cp vfs.Checkpoint) bool { return strings.HasPrefix(cp.Name, "proxy-") }
		// now is 8 days after the first checkpoint: older than 3 days are
		// 0..4; past the newest 2 runs (run7, run5) are run0..run4; run3
		// is pinned, origin and mine are no runs.
		o := vfs.PruneOptions{Keep: 2, OlderThan: 3 * 24 * time.Hour, Candidate: runs, DryRun: true, Collect: true}
		dry, err := f.v.PruneCheckpoints(o)
		if err != nil {
			t.Fatal(err)
		}
		if after, _ := f.v.Checkpoints(); len(after) != len(names) {
			t.Fatalf("a dry run deleted checkpoints: %d left", len(after))
		}
		o.DryRun = false
		res, err := f.v.PruneCheckpoints(o)
		if err != nil {
			t.Fatal(err)
		}
		wantDeleted := []string{"proxy-run0", "proxy-run2", "proxy-run4"}
		if !slices.Equal(res.Deleted, wantDeleted) || !slices.Equal(dry.Deleted, wantDeleted) {
			t.Fatalf("deleted %v (dry run: %v), want %v", res.Deleted, dry.Deleted, wantDeleted)
		}
		reasons := map[string]string{}
		for _, k := range res.Kept {
			reasons[k.Name] = k.Reason
		}
		wantKept := map[string]string{"origin": vfs.KeptOrigin, "proxy-run3": vfs.KeptFork, "proxy-run5": vfs.KeptNewest,
			"mine": vfs.KeptNotRun, "proxy-run7": vfs.KeptNewest}
		if fmt.Sprint(reasons) != fmt.Sprint(wantKept) {
			t.Errorf("kept %v, want %v", reasons, wantKept)
		}
		if res.GC.BytesFreed == 0 {
			t.Errorf("no chunk was freed: %+v", res.GC)
		}
		spaceAfter, err := f.v.Space()
		if err != nil {
			t.Fatal(err)
		}
		if spaceAfter.CheckpointBytes >= spaceBefore.CheckpointBytes || spaceAfter.GarbageBytes != 0 {
			t.Errorf("space before %+v, after %+v", spaceBefore, spaceAfter)
		}
		for _, n := range names {
			if slices.Contains(wantDeleted, n) {
				if _, err := f.v.GetCheckpoint(n); !errs.Is(err, errs.CheckpointNotFound) {
					t.Errorf("%s: %v", n, err)
				}
				continue
			}
			if got := readIn(t, f.v, n, "/big"); got != want[n] {
				t.Errorf("checkpoint %s reads %.20q…, want %.20q…", n, got, want[n])
			}
		}
		if err := f.v.RestoreCheckpoint("proxy-run5"); err != nil {
			t.Fatal(err)
		}
		if got := f.read("/big"); got != content(5) || f.read("/small-4") != "x" || f.read("/small-6") != "<missing>" {
			t.Errorf("restore of proxy-run5 after the prune: /big %.20q…", got)
		}
		// Keep 0 of every kind: only what is protected stays.
		res, err = f.v.PruneCheckpoints(vfs.PruneOptions{Keep: 0})
		if err != nil || !slices.Equal(res.Deleted, []string{"proxy-run5", "mine", "proxy-run7"}) {
			t.Fatalf("prune keep 0: %+v, %v", res, err)
		}
		left, _ := f.v.Checkpoints()
		var leftNames []string
		for _, cp := range left {
			leftNames = append(leftNames, cp.Name)
		}
		if !slices.Equal(leftNames, []string{"origin", "proxy-run3"}) || !bytes.Equal([]byte(readIn(t, f.v, "proxy-run3", "/big")), []byte(want["proxy-run3"])) {
			t.Errorf("after keep 0: %v", leftNames)
		}
	})
}
