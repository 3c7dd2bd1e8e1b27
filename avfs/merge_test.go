package avfs_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/avfs"
)

func changed(cs []avfs.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Kind)+" "+c.Path)
	}
	return out
}

// TestDiffByRef: Diff and Patch of a vault and of a home take REFs, and
// a REF to nothing fails typed before anything is compared.
func TestDiffByRef(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newTestHome(t)
	a := newVault(t, h, "a")
	if err := a.WriteFile(ctx, "/f.txt", []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SaveCheckpoint(ctx, "cp", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "/f.txt", []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "/g.txt", []byte("g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"modified /f.txt", "added /g.txt"}
	for _, refs := range [][2]string{{"cp", ""}, {"cp", "@"}, {"vault:a@cp", "vault:a"}} {
		cs, err := a.Diff(ctx, refs[0], refs[1])
		if err != nil || !slices.Equal(changed(cs), want) {
			t.Errorf("a.Diff(%q, %q) = %v, %v; want %v", refs[0], refs[1], changed(cs), err, want)
		}
	}
	if err := h.Use("a"); err != nil {
		t.Fatal(err)
	}
	b, err := h.Fork(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Remove(ctx, "/g.txt"); err != nil {
		t.Fatal(err)
	}
	if cs, err := h.Diff(ctx, "@", "vault:b"); err != nil || !slices.Equal(changed(cs), []string{"deleted /g.txt"}) {
		t.Errorf("h.Diff(@, vault:b) = %v, %v", changed(cs), err)
	}
	ps, err := h.Patch(ctx, "cp", "@")
	if err != nil || len(ps) != 2 || !strings.Contains(ps[0].Text, "-one\n+two\n") {
		t.Errorf("h.Patch(cp, @) = %+v, %v", ps, err)
	}
	if ps, err := b.Patch(ctx, "vault:a", "@"); err != nil || len(ps) != 1 || ps[0].Path != "/g.txt" || ps[0].Deletions != 1 {
		t.Errorf("b.Patch(vault:a, @) = %+v, %v", ps, err)
	}
	_, err = a.Diff(ctx, "nope", "")
	wantKind(t, err, avfs.CheckpointNotFound)
	_, err = h.Diff(ctx, "vault:nope", "@")
	wantKind(t, err, avfs.VaultNotFound)
	_, err = a.Diff(ctx, "cp", "bad ref!")
	wantKind(t, err, avfs.InvalidInput)
}

// TestMerge: a fork's changes merge into its parent; a conflict with
// ConflictFail changes nothing; refused merges are typed.
func TestMerge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newTestHome(t)
	base := newVault(t, h, "base")
	for p, c := range map[string]string{"/keep.txt": "keep\n", "/edit.txt": "a\nb\nc\n", "/gone.txt": "x\n"} {
		if err := base.WriteFile(ctx, p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	task, err := h.Fork(ctx, "base", "task")
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if err := task.WriteFile(ctx, "/edit.txt", []byte("a\nB\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := task.WriteFile(ctx, "/new.txt", []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := task.Remove(ctx, "/gone.txt"); err != nil {
		t.Fatal(err)
	}
	dry, err := h.Merge(ctx, "task", "", &avfs.MergeOptions{DryRun: true})
	if err != nil || dry.Merged || !dry.DryRun || len(dry.Applied) != 3 || dry.Checkpoint != "" {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if _, err := base.Stat(ctx, "/new.txt"); !avfs.IsKind(err, avfs.NotFound) {
		t.Fatalf("a dry run changed the target: %v", err)
	}
	res, err := h.Merge(ctx, "task", "", nil)
	if err != nil || !res.Merged || res.Target != "base" || res.Checkpoint == "" || len(res.Conflicts) != 0 {
		t.Fatalf("Merge = %+v, %v", res, err)
	}
	if b, err := base.ReadFile(ctx, "/edit.txt"); err != nil || string(b) != "a\nB\nc\n" {
		t.Errorf("merged edit.txt: %q, %v", b, err)
	}

	// Both sides change one line differently: a conflict, and with
	// ConflictFail nothing changes.
	if err := task.WriteFile(ctx, "/edit.txt", []byte("a\nTASK\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := base.WriteFile(ctx, "/edit.txt", []byte("a\nBASE\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = base.Merge(ctx, task, &avfs.MergeOptions{OnConflict: avfs.ConflictFail})
	if err != nil || res.Merged || len(res.Conflicts) != 1 || res.Conflicts[0].Kind != avfs.BothModified ||
		res.Conflicts[0].Ours != avfs.Modified {
		t.Fatalf("conflicting Merge = %+v, %v", res, err)
	}
	if b, _ := base.ReadFile(ctx, "/edit.txt"); string(b) != "a\nBASE\nc\n" {
		t.Errorf("a failed merge changed the target: %q", b)
	}
	if res, err = base.Merge(ctx, task, &avfs.MergeOptions{OnConflict: avfs.ConflictTheirs}); err != nil || !res.Merged {
		t.Fatalf("Merge theirs = %+v, %v", res, err)
	}
	if b, _ := base.ReadFile(ctx, "/edit.txt"); string(b) != "a\nTASK\nc\n" {
		t.Errorf("theirs: %q", b)
	}

	_, err = base.Merge(ctx, base, nil)
	wantKind(t, err, avfs.InvalidInput)
	_, err = h.Merge(ctx, "base", "", nil) // not a fork
	wantKind(t, err, avfs.InvalidInput)
	_, err = base.Merge(ctx, task, &avfs.MergeOptions{OnConflict: "whatever"})
	wantKind(t, err, avfs.InvalidInput)
}

// TestApply: a vault's changes are written into a host directory that
// holds the state they start from; a host file changed since is a
// conflict left alone; a dry run writes nothing.
func TestApply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newTestHome(t)
	v := newVault(t, h, "ap")
	host := t.TempDir()
	for p, c := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"} {
		if err := v.WriteFile(ctx, "/"+p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.SaveCheckpoint(ctx, "start", ""); err != nil {
		t.Fatal(err)
	}
	_, err := h.Apply(ctx, "ap", host, nil)
	wantKind(t, err, avfs.NotFound) // no recorded origin, no From
	for _, step := range []error{
		v.WriteFile(ctx, "/a.txt", []byte("A\n"), 0o644),
		v.WriteFile(ctx, "/b.txt", []byte("B\n"), 0o644),
		v.Remove(ctx, "/c.txt"),
		v.MkdirAll(ctx, "/d", 0o755),
		v.WriteFile(ctx, "/d/new.txt", []byte("new\n"), 0o600),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "b.txt"), []byte("host edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dry, err := h.Apply(ctx, "ap", host, &avfs.ApplyOptions{From: "start", DryRun: true})
	if err != nil || !dry.DryRun || len(dry.Applied) != 4 || len(dry.Conflicts) != 1 || dry.Conflicts[0].Path != "/b.txt" {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if _, err := os.Stat(filepath.Join(host, "d")); !os.IsNotExist(err) {
		t.Fatalf("a dry run wrote: %v", err)
	}
	res, err := h.Apply(ctx, "ap", host, &avfs.ApplyOptions{From: "start"})
	if err != nil || res.From != "vault:ap@start" || res.To != "vault:ap" || len(res.Conflicts) != 1 {
		t.Fatalf("Apply = %+v, %v", res, err)
	}
	for p, want := range map[string]string{"a.txt": "A\n", "b.txt": "host edit\n", "d/new.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(host, p)); err != nil || string(b) != want {
			t.Errorf("host %s: %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "c.txt")); !os.IsNotExist(err) {
		t.Errorf("c.txt on the host after apply: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(host, "d", "new.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the mode of the applied file: %v, %v", fi, err)
	}
	_, err = h.Apply(ctx, "ap", filepath.Join(host, "missing"), &avfs.ApplyOptions{From: "start"})
	wantKind(t, err, avfs.NotFound)
}
