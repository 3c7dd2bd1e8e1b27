// Command example is the runnable example of docs/guides/go.md: an agent
// workspace driven from Go with package avfs. It imports a repository
// into a vault, forks it for a task, runs commands in the fork through the
// policy-gated proxy, undoes a run, reviews the fork against its parent,
// writes the work into the repository as a git patch would, and cleans up.
//
//	go run ./docs/guides/examples/go [-home DIR] [-no-exec]
//
// It needs the avfs program on PATH (or $AGENTVFS_BIN) and FUSE for the
// steps that run commands; -no-exec makes those changes through the file
// API instead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/avfs"
)

func main() {
	home := flag.String("home", "", "the avfs home (default $AVFS_HOME, else ~/.avfs)")
	noExec := flag.Bool("no-exec", false, "do not run commands (hosts without FUSE)")
	flag.Parse()
	// Ctrl-C ends ctx: a command running through Exec is stopped (SIGTERM,
	// then SIGKILL after its grace period) and its run recorded as
	// interrupted.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *home, !*noExec); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		var e *avfs.Error
		if errors.As(err, &e) && e.Hint != "" {
			fmt.Fprintln(os.Stderr, "hint:", e.Hint)
		}
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, dir string, execute bool) (err error) {
	home, err := avfs.OpenHome(dir)
	if err != nil {
		return err
	}

	// A repository on the host, imported into a vault that records it as
	// its origin. Package avfs has no import call yet: the CLI does it.
	repo, err := os.MkdirTemp("", "avfs-guide-repo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(repo)
	if err := os.MkdirAll(filepath.Join(repo, "src"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(repo, "src", "greet.txt"), []byte("hello, world\n"), 0o644); err != nil {
		return err
	}
	var created struct{ Origin struct{ Checkpoint string } }
	if err := avfsCLI(ctx, home, &created, "vault", "create", "guide-base", "--from", repo); err != nil {
		return err
	}
	base, err := home.Open(ctx, "guide-base")
	if err != nil {
		return errors.Join(err, home.Delete(context.WithoutCancel(ctx), "guide-base"))
	}
	defer func() {
		base.Close()
		err = errors.Join(err, home.Delete(context.WithoutCancel(ctx), "guide-base"))
	}()
	fmt.Fprintf(out, "imported into checkpoint %s\n", created.Origin.Checkpoint)

	// Each task gets its own fork: O(1), nothing is copied.
	task, err := home.Fork(ctx, "guide-base", "guide-task")
	if err != nil {
		return err
	}
	defer func() {
		task.Close()
		err = errors.Join(err, home.Delete(context.WithoutCancel(ctx), "guide-task"))
	}()

	if execute {
		// The agent's command runs in a mount of the fork, behind a checkpoint.
		env, err := home.Exec(ctx, avfs.ExecRequest{
			Vault: "guide-task",
			Shell: "sed -i s/world/avfs/ src/greet.txt && echo 'todo: ship' > NOTES.md",
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "run %s: exit %d, %d changed\n", env.Result.State, *env.Result.ExitCode, env.Result.ChangedFiles)
		for _, c := range env.Result.Changes {
			fmt.Fprintf(out, "  %s %s\n", c.Kind, c.Path)
		}

		// A networked command is not run: it waits for a person's approval.
		env, err = home.Exec(ctx, avfs.ExecRequest{Vault: "guide-task", Argv: []string{"curl", "https://example.com"}})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "curl: %s (%s)\n", env.Result.State, env.Result.Decision.Action)

		// A run that goes wrong is undone in O(1).
		env, err = home.Exec(ctx, avfs.ExecRequest{Vault: "guide-task", Shell: "rm -rf src"})
		if err != nil {
			return err
		}
		if _, err := home.Undo(ctx, "guide-task", env.ID); err != nil {
			return err
		}
		fmt.Fprintf(out, "undid %q\n", strings.Join(env.Request.Command[2:], " "))

		// Any program can use a vault as a directory while it is mounted.
		dir, err := os.MkdirTemp("", "avfs-guide-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		m, err := home.Mount(ctx, "guide-task", dir, &avfs.MountOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		entries, err := os.ReadDir(filepath.Join(m.Mountpoint, "src"))
		if err != nil {
			m.Unmount(ctx)
			return err
		}
		fmt.Fprintf(out, "mounted read-only: src/%s\n", entries[0].Name())
		if err := m.Unmount(ctx); err != nil {
			return err
		}
	} else {
		if err := task.WriteFile(ctx, "/src/greet.txt", []byte("hello, avfs\n"), 0o644); err != nil {
			return err
		}
		if err := task.WriteFile(ctx, "/NOTES.md", []byte("todo: ship\n"), 0o644); err != nil {
			return err
		}
	}

	// Review: what the task changed, compared with its parent.
	changes, err := avfs.Diff(ctx, avfs.State{Vault: base}, avfs.State{Vault: task})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "task vs base:")
	for _, c := range changes {
		fmt.Fprintf(out, "  %s %s (%d -> %d bytes)\n", c.Kind, c.Path, c.SizeBefore, c.SizeAfter)
	}
	greet, err := task.ReadFile(ctx, "/src/greet.txt")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "greet.txt: %s", greet)

	// The task's work as a git patch, then written into the repository it
	// came from: FROM is the recorded origin (the parent's, for a fork).
	patches, err := avfs.Patch(ctx, avfs.State{Vault: base}, avfs.State{Vault: task})
	if err != nil {
		return err
	}
	for _, p := range patches {
		fmt.Fprint(out, p.Text)
	}
	applied, err := home.Apply(ctx, "guide-task", repo, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "applied %d changes, %d conflicts\n", len(applied.Applied), len(applied.Conflicts))
	if greet, err = os.ReadFile(filepath.Join(repo, "src", "greet.txt")); err != nil {
		return err
	}
	fmt.Fprintf(out, "the repository's greet.txt: %s", greet)

	// Errors are typed.
	if _, err := home.Open(ctx, "no-such-vault"); avfs.IsKind(err, avfs.VaultNotFound) {
		fmt.Fprintln(out, "no-such-vault:", avfs.KindOf(err))
	}
	return nil
}

// avfsCLI runs the avfs program ($AGENTVFS_BIN, else avfs on PATH) with
// --json on home, and decodes its document into doc: for the steps
// package avfs has no call for yet.
func avfsCLI(ctx context.Context, home *avfs.Home, doc any, args ...string) error {
	bin := os.Getenv("AGENTVFS_BIN")
	if bin == "" {
		bin = "avfs"
	}
	b, err := exec.CommandContext(ctx, bin, append([]string{"--json", "--home", home.Dir()}, args...)...).Output()
	if err != nil {
		return fmt.Errorf("avfs %s: %v: %s", strings.Join(args, " "), err, b)
	}
	return json.Unmarshal(b, doc)
}
