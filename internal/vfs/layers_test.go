package vfs_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func changes(t *testing.T, from, to vfs.StateRef) []string {
	t.Helper()
	cs, err := vfs.Diff(from, to)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s", c.Kind, c.Path))
	}
	return out
}

func TestCheckpointRestore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/a", "one")
		if _, err := f.v.SaveCheckpoint("first", "m"); err != nil {
			t.Fatal(err)
		}
		f.write("/a", "two")
		f.write("/b", "new")
		if _, err := f.v.SaveCheckpoint("second", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/a", "three (unsaved)")
		if err := f.v.RestoreCheckpoint("first"); err != nil {
			t.Fatal(err)
		}
		if got, gotB := f.read("/a"), f.read("/b"); got != "one" || gotB != "<missing>" {
			t.Fatalf("after restore first: a=%q b=%q", got, gotB)
		}
		// Later checkpoints stay available, readable and restorable.
		if got := readIn(t, f.v, "second", "/a"); got != "two" {
			t.Fatalf("checkpoint second reads a=%q", got)
		}
		f.write("/c", "on top of first")
		if err := f.v.RestoreCheckpoint("second"); err != nil {
			t.Fatal(err)
		}
		if got, gotC := f.read("/a"), f.read("/c"); got != "two" || gotC != "<missing>" {
			t.Fatalf("after restore second: a=%q c=%q", got, gotC)
		}
		if _, err := f.v.SaveCheckpoint("second", ""); !errs.Is(err, errs.AlreadyExists) {
			t.Fatalf("duplicate checkpoint name: %v", err)
		}
		if err := f.v.RestoreCheckpoint("nope"); !errs.Is(err, errs.CheckpointNotFound) {
			t.Fatalf("restore of a missing checkpoint: %v", err)
		}
		cps, err := f.v.Checkpoints()
		if err != nil || len(cps) != 2 || cps[0].Name != "first" || cps[0].Message != "m" {
			t.Fatalf("checkpoints = %+v, %v", cps, err)
		}
	})
}

func TestDiff(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/keep", "same")
		f.write("/mod", "before")
		f.write("/gone", "x")
		f.write("/dir/inner", "x")
		f.write("/chmod", "x")
		f.write("/retype", "x")
		f.write("/rewrite", "same bytes")
		if _, err := f.v.SaveCheckpoint("base", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/mod", "after")
		f.write("/new/deep", "x")
		f.write("/rewrite", "same bytes")
		f.update(func(tx *vfs.Tx) error {
			if err := tx.Unlink(vfs.RootIno, "gone"); err != nil {
				return err
			}
			d, _ := tx.Resolve("/dir", true)
			if err := tx.Unlink(d.Ino, "inner"); err != nil {
				return err
			}
			if err := tx.Rmdir(vfs.RootIno, "dir"); err != nil {
				return err
			}
			a, _ := tx.Resolve("/chmod", true)
			mode := uint32(0o600)
			if _, err := tx.SetAttr(a.Ino, vfs.SetAttr{Mode: &mode}); err != nil {
				return err
			}
			if err := tx.Unlink(vfs.RootIno, "retype"); err != nil {
				return err
			}
			_, err := tx.Mkdir(vfs.RootIno, "retype", 0o755, 0, 0)
			return err
		})
		got := changes(t, vfs.StateRef{Vault: f.v, Checkpoint: "base"}, vfs.StateRef{Vault: f.v})
		want := []string{
			"mode_changed /chmod", "deleted /dir", "deleted /dir/inner", "deleted /gone",
			"modified /mod", "added /new", "added /new/deep", "type_changed /retype",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("diff =\n%q\nwant\n%q", got, want)
		}
		if back := changes(t, vfs.StateRef{Vault: f.v}, vfs.StateRef{Vault: f.v}); len(back) != 0 {
			t.Fatalf("diff of a state with itself = %q", back)
		}
	})
}

func TestForks(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			f := newVault(t, engine)
			f.write("/shared", "parent data")
			f.write("/big", string(make([]byte, 3*vfs.ChunkSize)))
			fork, err := f.home.Fork("test", "task")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fork.Close() })
			t.Cleanup(func() { checkFsck(t, fork) })
			ff := &fixture{t: t, home: f.home, v: fork}
			if got := ff.read("/shared"); got != "parent data" {
				t.Fatalf("fork reads %q", got)
			}
			ff.write("/shared", "fork data")
			ff.write("/only-fork", "x")
			ff.update(func(tx *vfs.Tx) error {
				a, _ := tx.Resolve("/big", true)
				size := uint64(10)
				_, err := tx.SetAttr(a.Ino, vfs.SetAttr{Size: &size})
				return err
			})
			f.write("/only-parent", "y")
			if got := f.read("/shared"); got != "parent data" {
				t.Fatalf("parent changed by its fork: %q", got)
			}
			if got := f.read("/only-fork"); got != "<missing>" {
				t.Fatalf("parent sees the fork's file")
			}
			if got := ff.read("/only-parent"); got != "<missing>" {
				t.Fatalf("fork sees the parent's later file")
			}
			got := changes(t, vfs.StateRef{Vault: f.v}, vfs.StateRef{Vault: fork})
			want := []string{"modified /big", "added /only-fork", "deleted /only-parent", "modified /shared"}
			if !slices.Equal(got, want) {
				t.Fatalf("fork vs parent diff = %q, want %q", got, want)
			}
			// A vault with forks cannot be deleted; its fork can.
			if err := f.home.Delete("test"); !errs.Is(err, errs.VaultHasForks) {
				t.Fatalf("delete of a parent: %v", err)
			}
			// Compaction and gc of the parent leave the fork whole.
			if _, _, err := f.home.Compact("test"); err != nil {
				t.Fatal(err)
			}
			if got := ff.read("/shared"); got != "fork data" {
				t.Fatalf("fork after parent compaction reads %q", got)
			}
			fork2, err := f.home.Fork("task", "subtask")
			if err != nil {
				t.Fatal(err)
			}
			if got := readIn(t, fork2, "", "/shared"); got != "fork data" {
				t.Fatalf("fork of a fork reads %q", got)
			}
			checkFsck(t, fork2)
			fork2.Close()
			if err := f.home.Delete("subtask"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestQuota(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.update(func(tx *vfs.Tx) error { return tx.SetQuota(vfs.Quota{MaxFiles: 3, MaxSizeMB: 1, MaxFileSizeMB: 1}) })
		f.write("/a", "x")
		f.write("/b", "x")
		cases := []struct {
			name string
			op   func(tx *vfs.Tx) error
		}{
			{"files", func(tx *vfs.Tx) error {
				if _, err := tx.Mkdir(vfs.RootIno, "c", 0o755, 0, 0); err != nil {
					return err
				}
				_, err := tx.Create(vfs.RootIno, "d", 0o644, 0, 0)
				return err
			}},
			{"file size", func(tx *vfs.Tx) error {
				a, _ := tx.Resolve("/a", true)
				_, err := tx.Write(a.Ino, 1<<20, []byte("x"))
				return err
			}},
			{"vault size", func(tx *vfs.Tx) error {
				a, _ := tx.Resolve("/a", true)
				b, _ := tx.Resolve("/b", true)
				if _, err := tx.Write(a.Ino, 0, make([]byte, 600<<10)); err != nil {
					return err
				}
				_, err := tx.Write(b.Ino, 0, make([]byte, 600<<10))
				return err
			}},
		}
		for _, c := range cases {
			err := f.v.Update(c.op)
			if !errs.Is(err, errs.QuotaExceeded) {
				t.Fatalf("%s: err = %v, want QuotaExceeded", c.name, err)
			}
		}
		// Nothing of the failed transactions is kept.
		if got := f.read("/a"); got != "x" {
			t.Fatalf("a = %q after failed writes", got)
		}
		var u vfs.Usage
		f.update(func(tx *vfs.Tx) (err error) { u, err = tx.Usage(); return err })
		if u.Files != 2 || u.Bytes != 2 {
			t.Fatalf("usage = %+v", u)
		}
	})
}

func TestCompactKeepsEveryNamedState(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		for i := range 6 {
			f.write("/f", fmt.Sprint("v", i))
			f.write(fmt.Sprint("/file", i), "x")
			if _, err := f.v.SaveCheckpoint(fmt.Sprint("c", i), ""); err != nil {
				t.Fatal(err)
			}
		}
		f.write("/f", "working")
		for _, name := range []string{"c1", "c2", "c4"} {
			if err := f.v.DeleteCheckpoint(name); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.v.RestoreCheckpoint("c3"); err != nil { // abandons the working state
			t.Fatal(err)
		}
		st, err := f.v.Compact()
		if err != nil {
			t.Fatal(err)
		}
		if st.LayersMerged == 0 || st.LayersDropped == 0 {
			t.Fatalf("compaction did nothing: %+v", st)
		}
		gs, err := f.v.GC()
		if err != nil {
			t.Fatal(err)
		}
		if gs.ChunksFreed == 0 {
			t.Fatalf("gc freed nothing: %+v", gs)
		}
		for _, c := range []struct{ cp, want string }{{"c0", "v0"}, {"c3", "v3"}, {"c5", "v5"}, {"", "v3"}} {
			if got := readIn(t, f.v, c.cp, "/f"); got != c.want {
				t.Fatalf("after compaction %q reads %q, want %q", c.cp, got, c.want)
			}
		}
		if got := readIn(t, f.v, "c5", "/file4"); got != "x" {
			t.Fatalf("c5 lost /file4: %q", got)
		}
	})
}
