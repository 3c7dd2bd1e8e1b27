package vfs_test

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// mfile is what the reference model keeps of a file.
type mfile struct {
	content string
	mode    uint32
}

type mtree map[string]mfile

var mergePaths = []string{"/a", "/b", "/d/c", "/d/e", "/f/g"}

func drawTree(rt *rapid.T, label string, from mtree) mtree {
	out := mtree{}
	for p, f := range from {
		out[p] = f
	}
	for _, p := range mergePaths {
		switch rapid.IntRange(0, 3).Draw(rt, label+p) {
		case 0: // unchanged
		case 1:
			delete(out, p)
		case 2:
			out[p] = mfile{content: rapid.SampledFrom([]string{"x", "y", "z"}).Draw(rt, label+p+"c"), mode: out[p].mode | 0o644}
		case 3:
			f, ok := out[p]
			if !ok {
				f.content = "x"
			}
			f.mode = rapid.SampledFrom([]uint32{0o644, 0o755}).Draw(rt, label+p+"m")
			out[p] = f
		}
	}
	return out
}

func writeTree(t *testing.T, v *vfs.Vault, want mtree) {
	t.Helper()
	err := v.Update(func(tx *vfs.Tx) error {
		for _, p := range mergePaths {
			f, ok := want[p]
			if !ok {
				if _, err := tx.Resolve(p, false); err == nil {
					dir, name, _ := tx.ResolveParent(p)
					if err := tx.Unlink(dir, name); err != nil {
						return err
					}
				}
				continue
			}
			a, err := tx.WriteFile(p, []byte(f.content), f.mode)
			if err != nil {
				return err
			}
			mode := f.mode
			if _, err := tx.SetAttr(a.Ino, vfs.SetAttr{Mode: &mode}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readTree(t *testing.T, v *vfs.Vault) mtree {
	t.Helper()
	out := mtree{}
	err := v.View(func(tx *vfs.Tx) error {
		for _, p := range mergePaths {
			a, err := tx.Resolve(p, false)
			if err != nil {
				continue
			}
			b, err := tx.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = mfile{content: string(b), mode: a.Mode & 0o7777}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pick[T comparable](b, o, t T) (T, bool) {
	switch {
	case o == t, t == b:
		return o, true
	case o == b:
		return t, true
	}
	return o, false
}

// refMerge is the reference three-way merge of one-line files: content
// and mode merge apart, a file both sides added differently or one
// deleted while the other changed is a conflict.
func refMerge(base, ours, theirs mtree, on vfs.OnConflict) (mtree, []string) {
	out := mtree{}
	var conflicts []string
	for _, p := range mergePaths {
		b, bok := base[p]
		o, ook := ours[p]
		t, tok := theirs[p]
		switch {
		case ook == tok && (!ook || o == t), tok == bok && (!tok || t == b):
			if ook {
				out[p] = o
			}
			continue
		case ook == bok && (!ook || o == b):
			if tok {
				out[p] = t
			}
			continue
		}
		if !bok || !ook || !tok {
			conflicts = append(conflicts, p)
			if on == vfs.ConflictTheirs && tok {
				out[p] = t
			} else if on != vfs.ConflictTheirs && ook {
				out[p] = o
			}
			continue
		}
		c, cok := pick(b.content, o.content, t.content)
		m, mok := pick(b.mode, o.mode, t.mode)
		if cok && mok {
			out[p] = mfile{c, m}
			continue
		}
		conflicts = append(conflicts, p)
		switch on {
		case vfs.ConflictTheirs:
			out[p] = t
		case vfs.ConflictMarkers:
			if !cok {
				c = "<<<<<<< p\n" + o.content + "\n=======\n" + t.content + "\n>>>>>>> c\n"
			}
			out[p] = mfile{c, o.mode}
		default:
			out[p] = o
		}
	}
	if on == vfs.ConflictFail && len(conflicts) > 0 {
		return ours, conflicts
	}
	return out, conflicts
}

// A merge of a fork into its parent equals the reference three-way merge
// on random trees, leaves both vaults consistent, can be undone exactly
// by its checkpoint, and merging again changes nothing.
func TestMergeModel(t *testing.T) {
	setRapidChecks(t, 15)
	root := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(root, "home")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		h, err := registry.Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		p, err := h.Create("p", registry.CreateOptions{})
		if err != nil {
			rt.Fatal(err)
		}
		defer p.Close()
		if err := p.Update(func(tx *vfs.Tx) error {
			for _, d := range []string{"/d", "/f"} {
				if _, err := tx.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
		base := drawTree(rt, "base", mtree{})
		writeTree(t, p, base)
		c, err := h.Fork("p", "c")
		if err != nil {
			rt.Fatal(err)
		}
		defer c.Close()
		theirs := drawTree(rt, "theirs", base)
		ours := drawTree(rt, "ours", base)
		writeTree(t, c, theirs)
		writeTree(t, p, ours)
		on := rapid.SampledFrom([]vfs.OnConflict{vfs.ConflictFail, vfs.ConflictOurs, vfs.ConflictTheirs, vfs.ConflictMarkers}).Draw(rt, "on")
		dry := rapid.Bool().Draw(rt, "dry")

		res, err := vfs.Merge(c, p, on, dry)
		if err != nil {
			rt.Fatal(err)
		}
		want, wantConflicts := refMerge(base, ours, theirs, on)
		if dry {
			want = ours
		}
		var gotConflicts []string
		for _, x := range res.Conflicts {
			gotConflicts = append(gotConflicts, x.Path)
		}
		slices.Sort(gotConflicts)
		if !slices.Equal(gotConflicts, wantConflicts) {
			rt.Fatalf("conflicts %v (%+v), want %v", gotConflicts, res.Conflicts, wantConflicts)
		}
		if got := readTree(t, p); fmt.Sprint(got) != fmt.Sprint(want) {
			rt.Fatalf("merged %v\nwant   %v\nbase %v ours %v theirs %v\napplied %+v", got, want, base, ours, theirs, res.Applied)
		}
		if got := readTree(t, c); fmt.Sprint(got) != fmt.Sprint(theirs) {
			rt.Fatalf("the source changed: %v, want %v", got, theirs)
		}
		for _, v := range []*vfs.Vault{p, c} {
			r, err := v.Fsck()
			if err != nil || !r.OK() {
				rt.Fatalf("fsck of %s: %v %v", v.Name(), err, r.Problems)
			}
		}
		if res.Merged != (res.Checkpoint != nil) || (res.Merged && (dry || len(res.Applied) == 0)) {
			rt.Fatalf("merged %v, checkpoint %v, dry %v, applied %d", res.Merged, res.Checkpoint, dry, len(res.Applied))
		}
		if !res.Merged {
			return
		}
		if on != vfs.ConflictMarkers {
			again, err := vfs.Merge(c, p, on, false)
			if err != nil {
				rt.Fatal(err)
			}
			if len(again.Applied) != 0 || again.Checkpoint != nil {
				rt.Fatalf("a second merge applied %+v", again.Applied)
			}
		}
		if err := p.RestoreCheckpoint(*res.Checkpoint); err != nil {
			rt.Fatal(err)
		}
		if got := readTree(t, p); fmt.Sprint(got) != fmt.Sprint(ours) {
			rt.Fatalf("after the undo %v, want %v", got, ours)
		}
	})
}
