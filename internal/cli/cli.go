// Package cli is the avfs command line. Every command is a thin client of
// the registry and vfs packages; this package adds argument parsing, the
// JSON contract (docs/json-contract.md, docs/schema/) and the mapping of
// typed errors to exit codes, which lives in one place: output.go.
//
// Main is the whole entry point, so tests run the command line in-process
// with their own environment and streams.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Env is what a run of the command line sees of its process. Tests fill it
// in instead of touching the real environment, so they can run in parallel.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads an environment variable; nil means os.Getenv.
	Getenv func(string) string
	// IsTerminal reports whether a stream is a terminal; nil means a
	// check of the *os.File's descriptor.
	IsTerminal func(stream any) bool
}

// Main runs avfs with args (the program name left out) and returns the
// process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == overlay.EnterArg { // a proxy run's helper, not a command
		return overlay.EnterMain(args[1:], stderr)
	}
	return Run(ctx, args, Env{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// Run is Main with an explicit environment.
func Run(ctx context.Context, args []string, env Env) (code int) {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.IsTerminal == nil {
		env.IsTerminal = isTerminal
	}
	if env.Stdin == nil {
		env.Stdin = eofReader{}
	}
	a := &app{ctx: ctx, env: env, jsonOut: prescanJSON(args)}
	defer func() {
		// A panic is a bug, but the user still gets a typed error and an
		// exit code rather than a Go stack trace on stdout.
		if r := recover(); r != nil {
			fmt.Fprintf(env.Stderr, "avfs: internal error: %v\n%s", r, debug.Stack())
			code = a.fail(nil, &errs.Error{Kind: errs.IoError, Err: fmt.Errorf("internal error: %v", r)})
		}
	}()
	root := a.newRoot()
	root.SetArgs(args)
	root.SetContext(ctx)
	cmd, err := root.ExecuteC()
	if err != nil {
		return a.fail(cmd, err)
	}
	return 0
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func isTerminal(stream any) bool {
	f, ok := stream.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// prescanJSON finds --json before cobra parses anything, so that errors
// raised before flag parsing (an unknown command) also come out as JSON.
func prescanJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

// app is one run of the command line: its environment and global flags.
type app struct {
	ctx     context.Context
	env     Env
	jsonOut bool
	// stream prints JSON Lines (proxy exec --stream): an error too is one
	// line, an event of its own.
	streamLines bool
	vaultFlag   string
	homeFlag    string
	storeFlag   string
	// homeWarned is set once the home's warnings are printed, so a
	// command that opens the home twice says them once.
	homeWarned bool
	// ran is set once a command's own code starts: an error before that
	// came from parsing the command line and is a usage error.
	ran bool
	// keepRuns leaves the overlay runs a crash left as they are (fsck
	// reports them) instead of ingesting them at the vault's open.
	keepRuns bool
}

// action is the body of a command: it returns the result to print (nil
// when it printed its own output) or an error.
type action func(cmd *cobra.Command, args []string) (any, error)

// run adapts an action to cobra and prints its result.
func (a *app) run(fn action) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.ran = true
		if err := a.checkVaultFlag(cmd); err != nil {
			return err
		}
		res, err := fn(cmd, args)
		if err != nil {
			return err
		}
		if res != nil {
			a.emit(res)
		}
		return nil
	}
}

func (a *app) checkVaultFlag(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("vault"); f != nil && f.Changed {
		return registry.CheckName(a.vaultFlag)
	}
	return nil
}

// newRoot builds the command tree.
func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "avfs",
		Short: "Isolated, forkable, checkpointed workspaces for AI agents",
		Long: `avfs keeps an agent's workspace in a vault: one database file under
$AVFS_HOME/vaults (default ~/.avfs), or a table of a PostgreSQL store that
many hosts share (--store, $AVFS_STORE). Vaults fork and checkpoint in
milliseconds whatever their size; files inside are reached with the file
commands, import and export, or a mount.

Every command takes --json: exactly one JSON document is printed on stdout,
on success and on failure, and the exit code follows the table in
docs/json-contract.md.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) (any, error) {
			if a.jsonOut {
				return nil, usageErrorf("missing command")
			}
			// A person who types just `avfs` gets the usage, on stderr with
			// exit code 2 as for any other command line that names no
			// command: a script running `avfs $CMD` with CMD empty fails.
			cmd.SetOut(a.env.Stderr)
			if err := cmd.Help(); err != nil {
				return nil, err
			}
			return nil, exitStatus(UsageExitCode)
		}),
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(a.env.Stdin)
	root.SetOut(a.env.Stdout)
	root.SetErr(a.env.Stderr)
	pf := root.PersistentFlags()
	pf.BoolVar(&a.jsonOut, "json", a.jsonOut, "print exactly one JSON document on stdout")
	pf.StringVar(&a.vaultFlag, "vault", "", "vault to work on (default $AVFS_VAULT, else the current vault)")
	pf.StringVar(&a.homeFlag, "home", "", "avfs home directory (default $AVFS_HOME, else ~/.avfs)")
	pf.StringVar(&a.storeFlag, "store", "", "store shared by homes that holds the vaults, postgres://… (default $AVFS_STORE, else store in $AVFS_HOME/config.toml, else files under $AVFS_HOME/vaults)")
	_ = root.RegisterFlagCompletionFunc("vault", a.completeVaults)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if a.jsonOut {
			a.emit(helpResult{Command: c.CommandPath(), Help: helpText(c)})
			return
		}
		defaultHelp(c, args)
	})
	root.AddGroup(
		&cobra.Group{ID: "vaults", Title: "Vaults and checkpoints:"},
		&cobra.Group{ID: "files", Title: "Files in the vault:"},
		&cobra.Group{ID: "proxy", Title: "Running commands:"},
		&cobra.Group{ID: "maint", Title: "Maintenance:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("vaults", a.vaultCmd(), a.checkpointCmd(), a.quotaCmd())
	add("files", a.fileCmds()...)
	add("files", a.importCmd(), a.exportCmd())
	add("files", a.diffCmd(), a.applyCmd())
	add("files", a.mountCmds()...)
	add("proxy", a.proxyCmd(), a.policyCmd(), a.mcpCmd())
	add("maint", a.fsckCmd(), a.gcCmd(), a.compactCmd(), a.versionCmd(), a.completionCmd())
	root.SetHelpCommandGroupID("maint")
	return root
}

// group makes a command that only holds subcommands; run alone, or with
// an unknown subcommand, it is a usage error.
func (a *app) group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if len(args) > 0 {
				return nil, usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil, usageErrorf("missing subcommand for %q", cmd.CommandPath())
		}),
	}
	c.AddCommand(subs...)
	return c
}

// homeDir is --home, else $AVFS_HOME, else ~/.avfs.
func (a *app) homeDir() (string, error) {
	if a.homeFlag != "" {
		return a.homeFlag, nil
	}
	if d := a.env.Getenv("AVFS_HOME"); d != "" {
		return d, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", &errs.Error{Kind: errs.IoError, Op: "home", Err: err, Hint: "set AVFS_HOME or pass --home"}
	}
	return filepath.Join(h, ".avfs"), nil
}

func (a *app) home() (*registry.Home, error) {
	dir, err := a.homeDir()
	if err != nil {
		return nil, err
	}
	store := a.storeFlag
	if store == "" {
		store = a.env.Getenv(registry.StoreEnv)
	}
	ttl, _ := time.ParseDuration(a.env.Getenv(registry.LeaseTTLEnv))
	h, err := registry.OpenWith(dir, registry.Options{Store: store, LeaseTTL: ttl})
	if err != nil {
		return nil, err
	}
	if !a.homeWarned {
		a.homeWarned = true
		for _, w := range h.Warnings {
			fmt.Fprintf(a.env.Stderr, "avfs: warning: %s\n", w)
		}
	}
	// While a vault is mounted read-write its serving process is its only
	// writer: writes from here get VaultLocked naming the mountpoint.
	h.WriteGuard = func(vault string) error { return mountd.CheckWriter(h, vault) }
	// ...and what a command reads or freezes beside it holds every write
	// made through it, also those its write-back cache still buffers.
	h.BeforeOpen = func(vault string) error { return mountd.Persist(h, vault) }
	// The overlay transport's layer cache follows the vaults: what they
	// free is dropped, and a run a crash left is ingested before anything
	// else opens its vault, as its writes were the vault's had it run on
	// FUSE. fsck (keepRuns) only reports such runs.
	overlaymount.Follow(h, func() (string, bool) {
		runDir, ok := proxy.FoundRuntimeDir(h.Dir, a.env.Getenv("XDG_RUNTIME_DIR"))
		return overlaymount.CacheDir(runDir), ok
	}, func() bool { return a.keepRuns }, func(msg string) { fmt.Fprintf(a.env.Stderr, "avfs: warning: %s\n", msg) })
	return h, nil
}

// vaultName is the vault a command works on: --vault, else $AVFS_VAULT,
// else the home's current vault.
func (a *app) vaultName(h *registry.Home) (string, error) {
	name := a.vaultFlag
	if name == "" {
		name = a.env.Getenv("AVFS_VAULT")
	}
	if name == "" {
		return h.Current()
	}
	return name, registry.CheckName(name)
}

// openVault opens the vault a command works on (or the one named, when
// name is not empty). The caller closes it.
func (a *app) openVault(name string) (*registry.Home, *vfs.Vault, error) {
	h, err := a.home()
	if err != nil {
		return nil, nil, err
	}
	if name == "" {
		if name, err = a.vaultName(h); err != nil {
			return nil, nil, err
		}
	}
	v, err := h.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return h, v, nil
}

// withVault runs fn on the selected vault and closes it after.
func (a *app) withVault(fn func(h *registry.Home, v *vfs.Vault) (any, error)) (any, error) {
	h, v, err := a.openVault("")
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return fn(h, v)
}

func (a *app) completeVaults(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	h, err := a.home()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, _ := vaultNames(h)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// vaultNames lists the names of the vaults of a home.
func vaultNames(h *registry.Home) ([]string, error) { return h.Names() }

// Argument checks. Their errors are usage errors (exit code 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

func exactArgs(n int) cobra.PositionalArgs {
	return rangeArgs(n, n)
}

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			want := fmt.Sprintf("%d", lo)
			if hi != lo {
				want = fmt.Sprintf("%d to %d", lo, hi)
			}
			return usageErrorf("%q takes %s argument(s), got %d", cmd.CommandPath(), want, len(args))
		}
		return nil
	}
}
