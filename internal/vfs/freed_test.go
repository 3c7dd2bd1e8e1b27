package vfs_test

import (
	"slices"
	"testing"
)

// TestLayersFreedTold: the layers compaction and collection delete are
// exactly the ones SetLayersFreed hears of, each once, after the fact.
func TestLayersFreedTold(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		var told []uint64
		f.v.SetLayersFreed(func(layers []uint64) {
			held, err := f.v.LayerIDs()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				if slices.Contains(held, l) {
					t.Errorf("told of layer %d before it was deleted", l)
				}
			}
			told = append(told, layers...)
		})
		layers := func() []uint64 {
			ids, err := f.v.LayerIDs()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(ids)
			return ids
		}
		gone := func(before, after []uint64) []uint64 {
			return slices.DeleteFunc(slices.Clone(before), func(l uint64) bool { return slices.Contains(after, l) })
		}
		for _, step := range []struct {
			name string
			prep func()
			run  func() error
		}{
			{"gc of an abandoned working state", func() {
				f.write("/a", "a")
				if _, err := f.v.SaveCheckpoint("one", ""); err != nil {
					t.Fatal(err)
				}
				f.write("/b", "b")
				if err := f.v.Seal(); err != nil {
					t.Fatal(err)
				}
				f.write("/c", "c")
				if err := f.v.RestoreCheckpoint("one"); err != nil {
					t.Fatal(err)
				}
			}, func() error { _, err := f.v.GC(); return err }},
			{"compaction after a checkpoint delete", func() {
				for _, n := range []string{"two", "three"} {
					f.write("/"+n, n)
					if _, err := f.v.SaveCheckpoint(n, ""); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.v.DeleteCheckpoint("two"); err != nil {
					t.Fatal(err)
				}
			}, func() error { _, err := f.v.Compact(); return err }},
		} {
			step.prep()
			before := layers()
			told = nil
			if err := step.run(); err != nil {
				t.Fatal(err)
			}
			want := gone(before, layers())
			slices.Sort(told)
			if len(want) == 0 || !slices.Equal(told, want) {
				t.Errorf("%s: told %v, deleted %v", step.name, told, want)
			}
		}
		checkFsck(t, f.v)
	})
}
