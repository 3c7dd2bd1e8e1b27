//go:build linux

package overlay

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestEntryOfAnotherBootIsMadeAgain: an entry placed without a sync
// (Boot set: a base of the Copies layout, any adopted upper) is used in
// its own boot and, in another, dropped and made again from the vault,
// never used: a crash of the host may have left it half written, even
// while another process opening it too holds its lock for a moment. A
// Shared build, whose store data must last, is synced (no Boot).
func TestEntryOfAnotherBootIsMadeAgain(t *testing.T) { forLayouts(t, testEntryOfAnotherBoot) }

func testEntryOfAnotherBoot(t *testing.T, l Layout) {
	needRoot(t)
	if currentBoot() == "" {
		t.Skip("the boot cannot be named here")
	}
	v, _ := newVault(t, vfs.Quota{})
	c := newCache(t, l)
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)

	meta := func(key string) (entryMeta, string) {
		t.Helper()
		p := filepath.Join(c.path(key), "meta.json")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m entryMeta
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m, p
	}
	setBoot := func(key, boot string) {
		t.Helper()
		m, p := meta(key)
		m.Boot = boot
		b, _ := json.Marshal(m)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var l1 Lease
	p := prepareState(t, c, v, &l1)
	l1.Release()
	base := p.Top
	if m, _ := meta(base); (l == Shared) != (m.Boot == "") || (m.Boot != "" && m.Boot != currentBoot()) {
		t.Fatalf("a %s base's boot is %q, want %q", l, m.Boot, map[bool]string{true: "", false: currentBoot()}[l == Shared])
	}

	// A run's upper, adopted: always of this boot.
	if _, err := v.SaveCheckpoint("cp", ""); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(context.Background(), v, "cp", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run.Merged, "new"), []byte("n"), 0o644); err != nil {
		run.Discard()
		t.Fatal(err)
	}
	fin, err := run.Finish(v)
	if err != nil || !fin.Adopted {
		t.Fatalf("finish: %+v %v", fin, err)
	}
	_, top, err := standOnFrozen(v)
	if err != nil {
		t.Fatal(err)
	}
	delta := Key(v.ID(), top)
	if m, _ := meta(delta); m.Boot != currentBoot() || m.Parent != base {
		t.Fatalf("the adopted upper's meta %+v, want boot %q over %s", m, currentBoot(), base)
	}

	// In its own boot the stack is used as it is.
	var l2 Lease
	if p := prepareState(t, c, v, &l2); p.Built || len(p.Lowers) != 2 {
		t.Fatalf("in its own boot: built %v, %d lowers, want the two entries used", p.Built, len(p.Lowers))
	}
	l2.Release()

	// As if the host had rebooted since the upper was adopted; another
	// process opening it at the same moment holds its lock a while.
	setBoot(delta, "an-earlier-boot")
	want := snapshot(t, materializeTo(t, v), snapOpts{times: true})
	held, err := os.Open(filepath.Join(c.path(delta), "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(held.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		held.Close()
	}()
	var l3 Lease
	defer l3.Release()
	p = prepareState(t, c, v, &l3)
	if !p.Built || len(p.Lowers) != 1 {
		t.Fatalf("an entry of another boot: built %v with %d lowers, want the state made again", p.Built, len(p.Lowers))
	}
	if m, _ := meta(p.Top); m.Boot == "an-earlier-boot" {
		t.Fatal("the entry of another boot is still in place")
	}
	if d := diffLines(want, snapshotStack(t, p.Lowers, p.Data, snapOpts{times: true})); d != "" {
		t.Fatalf("the state made again differs from the vault's:\n%s", d)
	}
}
