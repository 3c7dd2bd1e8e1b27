//go:build linux

package overlaymount_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestFreedKeepsLiveLowers: a collection that frees the layers a live
// read-only run stands on drops no entry of them (the run's shared
// locks), the run keeps reading; once it ends, the next start's sweep
// drops them, and a collection with no mount drops at once.
func TestFreedKeepsLiveLowers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlay mounts need root")
	}
	root := filepath.Join(t.TempDir(), "layers")
	if err := overlaymount.New(root).Available(); err != nil {
		t.Skipf("overlay unavailable here: %v", err)
	}
	eng, err := engines.Create(filepath.Join(t.TempDir(), "v.avfs"), "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	v, err := vfs.Create(eng, "v", vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	v.SetLayersFreed(func(layers []uint64) {
		if err := overlaymount.Freed(root, v.ID(), layers); err != nil {
			t.Errorf("Freed: %v", err)
		}
	})
	c := &overlay.Cache{Root: root, Format: overlay.Trusted}
	ctx := context.Background()
	if _, err := v.SaveCheckpoint("empty", ""); err != nil {
		t.Fatal(err)
	}
	// Two runs write /b and /a; each upper becomes the entry of the layer
	// it sealed. The first is the state just after "empty" (named by it).
	var adopted string
	for _, name := range []string{"b", "a"} {
		rw, err := c.Start(ctx, v, "rw"+name, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rw.Merged, name), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fin, err := rw.Finish(v)
		if err != nil || !fin.Adopted {
			t.Fatalf("finish: %v, adopted %v", err, fin.Adopted)
		}
		adopted = overlay.Key(v.ID(), fin.Sealed.Layer)
	}
	ro, err := c.StartReadOnly(ctx, v, "ro", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Discard()
	// Nothing names the run's layer once the state goes back: gc frees it.
	if err := v.RestoreCheckpoint("empty"); err != nil {
		t.Fatal(err)
	}
	st, err := v.GC()
	if err != nil || st.LayersDropped == 0 {
		t.Fatalf("gc: %v, %+v", err, st)
	}
	if _, err := os.Stat(c.Tree(adopted)); err != nil {
		t.Fatalf("the entry under a live run was dropped: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ro.Merged, "a")); err != nil || string(b) != "a\n" {
		t.Fatalf("the live run reads %q, %v", b, err)
	}
	if err := ro.Discard(); err != nil {
		t.Fatal(err)
	}
	// The next start sweeps what the live run held.
	next, err := c.StartReadOnly(ctx, v, "next", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, adopted)); !os.IsNotExist(err) {
		t.Errorf("the entry of a freed layer outlived the next start: %v", err)
	}
	for _, e := range mustEntries(t, c) {
		if e.Key == adopted {
			t.Errorf("entry %s still listed", e.Key)
		}
	}
}

func mustEntries(t *testing.T, c *overlay.Cache) []overlay.Entry {
	t.Helper()
	ents, err := c.Entries()
	if err != nil {
		t.Fatal(err)
	}
	return ents
}
