package avfs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/agentvfs/agentvfs/avfs"
)

// newHome opens a fresh home in a temporary directory; the returned
// function removes it.
func newHome() (*avfs.Home, func()) {
	dir, err := os.MkdirTemp("", "avfs-example-")
	if err != nil {
		log.Fatal(err)
	}
	home, err := avfs.OpenHome(dir)
	if err != nil {
		log.Fatal(err)
	}
	return home, func() { os.RemoveAll(dir) }
}

func ExampleHome_Create() {
	ctx := context.Background()
	home, cleanup := newHome() // avfs.OpenHome(dir); "" is $AVFS_HOME or ~/.avfs
	defer cleanup()

	v, err := home.Create(ctx, "workspace", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	if err := v.MkdirAll(ctx, "/src", 0o755); err != nil {
		log.Fatal(err)
	}
	if err := v.WriteFile(ctx, "/src/main.go", []byte("package main\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	entries, err := v.ReadDir(ctx, "/src")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name, e.Type, e.Size, e.Mode)
	}
	vaults, _ := home.List(ctx)
	for _, info := range vaults {
		fmt.Println(info.Name, info.Backend)
	}
	// Output:
	// main.go file 13 -rw-r--r--
	// workspace sqlite
}

func ExampleHome_Fork() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()

	base, err := home.Create(ctx, "base", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer base.Close()
	if err := base.WriteFile(ctx, "/README", []byte("shared\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	// A fork starts as base's working state, in O(1), and goes its own way.
	task, err := home.Fork(ctx, "base", "task-1")
	if err != nil {
		log.Fatal(err)
	}
	defer task.Close()
	if err := task.WriteFile(ctx, "/README", []byte("changed in the fork\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := task.WriteFile(ctx, "/result.txt", []byte("42\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	b, _ := base.ReadFile(ctx, "/README")
	fmt.Printf("base: %s", b)
	b, _ = task.ReadFile(ctx, "/README")
	fmt.Printf("task-1: %s", b)

	// What the fork changed, compared with its parent.
	changes, err := avfs.Diff(ctx, avfs.State{Vault: base}, avfs.State{Vault: task})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range changes {
		fmt.Println(c.Kind, c.Path)
	}

	// A vault with forks cannot be deleted before them.
	err = home.Delete(ctx, "base")
	fmt.Println(avfs.IsKind(err, avfs.VaultHasForks))
	// Output:
	// base: shared
	// task-1: changed in the fork
	// modified /README
	// added /result.txt
	// true
}

func ExampleVault_SaveCheckpoint() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "work", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	if err := v.WriteFile(ctx, "/config.toml", []byte("debug = false\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	// O(1), whatever the vault holds.
	cp, err := v.SaveCheckpoint(ctx, "before-agent", "known good")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cp.Name, cp.Message, cp.Files, cp.Bytes)

	cps, _ := v.Checkpoints(ctx)
	fmt.Println(len(cps))
	// Output:
	// before-agent known good 1 14
	// 1
}

func ExampleVault_RestoreCheckpoint() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "work", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	if err := v.WriteFile(ctx, "/notes.txt", []byte("v1\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if _, err := v.SaveCheckpoint(ctx, "v1", ""); err != nil {
		log.Fatal(err)
	}
	// An agent makes a mess...
	if err := v.WriteFile(ctx, "/notes.txt", []byte("garbage\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := v.WriteFile(ctx, "/tmp.bin", []byte{0, 1, 2}, 0o600); err != nil {
		log.Fatal(err)
	}
	// ...and it is undone in O(1).
	if err := v.RestoreCheckpoint(ctx, "v1"); err != nil {
		log.Fatal(err)
	}
	b, _ := v.ReadFile(ctx, "/notes.txt")
	fmt.Printf("%s", b)
	_, err = v.Stat(ctx, "/tmp.bin")
	fmt.Println(avfs.IsKind(err, avfs.NotFound))
	// Output:
	// v1
	// true
}

func ExampleVault_Diff() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "work", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	_ = v.WriteFile(ctx, "/keep.txt", []byte("same\n"), 0o644)
	_ = v.WriteFile(ctx, "/edit.txt", []byte("old\n"), 0o644)
	_ = v.WriteFile(ctx, "/drop.txt", []byte("bye\n"), 0o644)
	if _, err := v.SaveCheckpoint(ctx, "start", ""); err != nil {
		log.Fatal(err)
	}
	_ = v.WriteFile(ctx, "/edit.txt", []byte("new content\n"), 0o644)
	_ = v.Remove(ctx, "/drop.txt")
	_ = v.WriteFile(ctx, "/new.txt", []byte("hi\n"), 0o644)

	// From checkpoint "start" to the working state ("").
	changes, err := v.Diff(ctx, "start", "")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range changes {
		fmt.Println(c.Kind, c.Path, c.SizeBefore, c.SizeAfter)
	}
	// Output:
	// deleted /drop.txt 4 0
	// modified /edit.txt 4 12
	// added /new.txt 0 3
}

func ExampleHome_Exec() {
	ctx := context.Background() // ending it stops the command, as Ctrl-C stops `avfs proxy exec`
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "work", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	_ = v.WriteFile(ctx, "/notes.txt", []byte("remember the milk\n"), 0o644)

	// The policy allows this behind a checkpoint; the command runs in a
	// mount of the vault, and the envelope lists what it changed.
	env, err := home.Exec(ctx, avfs.ExecRequest{Vault: "work", Shell: "cat notes.txt && echo done > status.txt"})
	if err != nil {
		log.Fatal(err)
	}
	r := env.Result
	fmt.Println(r.State, *r.ExitCode, r.Decision.Action)
	fmt.Print(r.Stdout)
	for _, c := range r.Changes {
		fmt.Println(c.Kind, c.Path)
	}

	// The run saved a checkpoint first: undo it.
	if _, err := home.Undo(ctx, "work", env.ID); err != nil {
		log.Fatal(err)
	}
	_, err = v.Stat(ctx, "/status.txt")
	fmt.Println("after undo:", avfs.IsKind(err, avfs.NotFound))

	// A command that reaches outside the workspace is denied: nothing runs.
	env, err = home.Exec(ctx, avfs.ExecRequest{Vault: "work", Argv: []string{"cat", "/etc/passwd"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env.Result.State, env.Result.Decision.Action, env.Result.ExitCode == nil)
	// Output:
	// completed 0 allow_with_checkpoint
	// remember the milk
	// added /status.txt
	// after undo: true
	// denied deny true
}

func ExampleHome_Mount() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "work", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	dir := filepath.Join(home.Dir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	// Served by its own avfs process until Unmount.
	m, err := home.Mount(ctx, "work", dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Any program can now use the vault as a directory.
	if err := os.WriteFile(filepath.Join(m.Mountpoint, "hello.txt"), []byte("through the mount\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	// While mounted read-write, the mount is the vault's only writer.
	err = v.WriteFile(ctx, "/other.txt", nil, 0o644)
	fmt.Println("write beside the mount:", avfs.KindOf(err))

	if err := m.Unmount(ctx); err != nil {
		log.Fatal(err)
	}
	b, _ := v.ReadFile(ctx, "/hello.txt")
	fmt.Printf("%s", b)
	// Output:
	// write beside the mount: VaultLocked
	// through the mount
}

func ExampleIsKind() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()

	_, err := home.Open(ctx, "nope")
	fmt.Println(avfs.IsKind(err, avfs.VaultNotFound))

	var e *avfs.Error
	if errors.As(err, &e) {
		fmt.Println(e.Kind)
	}
	// Output:
	// true
	// VaultNotFound
}

func ExamplePatch() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "work", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	_ = v.WriteFile(ctx, "/edit.txt", []byte("one\ntwo\n"), 0o644)
	if _, err := v.SaveCheckpoint(ctx, "start", ""); err != nil {
		log.Fatal(err)
	}
	_ = v.WriteFile(ctx, "/edit.txt", []byte("one\n2\n"), 0o644)

	patches, err := avfs.Patch(ctx, avfs.State{Vault: v, Checkpoint: "start"}, avfs.State{Vault: v})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range patches {
		fmt.Print(p.Text)
	}
	// Output:
	// diff --git a/edit.txt b/edit.txt
	// --- a/edit.txt
	// +++ b/edit.txt
	// @@ -1,2 +1,2 @@
	//  one
	// -two
	// +2
}

func ExampleVault_FSAt() {
	ctx := context.Background()
	home, cleanup := newHome()
	defer cleanup()
	v, err := home.Create(ctx, "w", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	_ = v.MkdirAll(ctx, "/docs", 0o755)
	_ = v.WriteFile(ctx, "/docs/a.md", []byte("first\n"), 0o644)
	if _, err := v.SaveCheckpoint(ctx, "v1", ""); err != nil {
		log.Fatal(err)
	}
	_ = v.WriteFile(ctx, "/docs/b.md", []byte("later\n"), 0o644)

	// Any io/fs code reads a state of the vault: here the checkpoint,
	// which does not see the later file.
	v1, err := v.FSAt(ctx, "v1")
	if err != nil {
		log.Fatal(err)
	}
	defer v1.Close()
	_ = fs.WalkDir(v1, ".", func(path string, d fs.DirEntry, err error) error {
		fmt.Println(path, d.IsDir())
		return err
	})
	now, _ := fs.Glob(v.FS(), "docs/*.md")
	fmt.Println(now)
	// Output:
	// . true
	// docs true
	// docs/a.md false
	// [docs/a.md docs/b.md]
}
