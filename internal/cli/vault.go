package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func (a *app) vaultCmd() *cobra.Command {
	return a.group("vault", "Create, list, inspect, fork, select and delete vaults",
		a.vaultCreateCmd(), a.vaultListCmd(), a.vaultInfoCmd(), a.vaultUseCmd(),
		a.vaultForkCmd(), a.vaultMergeCmd(), a.vaultSetCmd(), a.vaultDeleteCmd())
}

// vaultInfo is the JSON of vault create, info and use.
type vaultInfo struct {
	Name          string    `json:"name"`
	VaultID       string    `json:"vault_id"`
	Backend       string    `json:"backend"`
	Path          string    `json:"path"`
	FormatVersion int       `json:"format_version"`
	CreatedAt     time.Time `json:"created_at"`
	Current       bool      `json:"current"`
	Parent        *string   `json:"parent"` // null unless a fork
	Forks         []string  `json:"forks"`
	Checkpoints   int       `json:"checkpoints"`
	Usage         vfs.Usage `json:"usage"`
	Quota         vfs.Quota `json:"quota"`
	FileSize      int64     `json:"file_size"` // bytes of the vault file on disk
	// Origin is where the content came from (vault create --from, import); null
	// when it was not imported so.
	Origin *vfs.Origin `json:"origin"`
	// Space says who needs the bytes of the file; vault info only.
	Space *vfs.SpaceReport `json:"space,omitempty"`
	// Settings are the vault's own options (vault set), defaults filled in.
	Settings vfs.Settings `json:"settings"`
}

func (r vaultInfo) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", r.Name)
	fmt.Fprintf(tw, "backend\t%s\n", r.Backend)
	fmt.Fprintf(tw, "path\t%s\n", r.Path)
	fmt.Fprintf(tw, "created\t%s\n", r.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "current\t%v\n", r.Current)
	if r.Parent != nil {
		fmt.Fprintf(tw, "fork of\t%s\n", *r.Parent)
	}
	if len(r.Forks) > 0 {
		fmt.Fprintf(tw, "forks\t%s\n", strings.Join(r.Forks, ", "))
	}
	fmt.Fprintf(tw, "checkpoints\t%d\n", r.Checkpoints)
	fmt.Fprintf(tw, "usage\t%s in %d files\n", sizeString(r.Usage.Bytes), r.Usage.Files)
	fmt.Fprintf(tw, "quota\t%s\n", quotaString(r.Quota))
	fmt.Fprintf(tw, "file size\t%s\n", sizeString(r.FileSize))
	if r.Origin != nil {
		fmt.Fprintf(tw, "origin\t%s (checkpoint %s)\n", r.Origin.HostDir, r.Origin.Checkpoint)
	}
	fmt.Fprintf(tw, "run checkpoints kept\t%s\n", runCheckpointsString(r.Settings.RunCheckpoints))
	if sp := r.Space; sp != nil {
		fmt.Fprintf(tw, "live data\t%s\n", sizeString(sp.LiveBytes))
		fmt.Fprintf(tw, "held by checkpoints\t%s\n", sizeString(sp.CheckpointBytes))
		fmt.Fprintf(tw, "garbage\t%s\n", sizeString(sp.GarbageBytes))
		fmt.Fprintf(tw, "free in file\t%s\n", sizeString(sp.FreeBytes))
	}
	tw.Flush()
}

func describe(h *registry.Home, v *vfs.Vault) (vaultInfo, error) {
	info, err := h.Describe(v)
	if err != nil {
		return vaultInfo{}, err
	}
	r := vaultInfo{Name: info.Name, VaultID: info.ID, Backend: info.Backend, Path: info.Path,
		FormatVersion: info.FormatVersion, CreatedAt: utc(info.CreatedAt), Current: info.Current}
	if info.Parent != "" {
		r.Parent = &info.Parent
	}
	if r.Forks, err = h.LiveForks(v); err != nil {
		return r, err
	}
	if r.Forks == nil {
		r.Forks = []string{}
	}
	cps, err := v.Checkpoints()
	if err != nil {
		return r, err
	}
	r.Checkpoints = len(cps)
	err = v.View(func(tx *vfs.Tx) (err error) {
		if r.Usage, err = tx.Usage(); err != nil {
			return err
		}
		r.Quota, err = tx.Quota()
		return err
	})
	r.FileSize = fileSize(r.Path)
	if err == nil {
		r.Origin, err = v.Origin()
	}
	if err == nil {
		r.Settings, err = v.Settings()
	}
	return r, err
}

// fileSize is the size of a vault file with the engine's side files.
func fileSize(path string) int64 {
	var n int64
	for _, p := range engines.Files(path) {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func (a *app) vaultCreateCmd() *cobra.Command {
	var backend, from string
	var use bool
	var q vfs.Quota
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an empty vault",
		Long: `Create an empty vault NAME: one file under $AVFS_HOME/vaults. Names are 1-64
characters of A-Z a-z 0-9 _ - and do not start with -. Quotas of 0 mean
unlimited and can be changed later with ` + "`avfs quota set`." + `

--from HOST_DIR imports HOST_DIR into the new vault, saves checkpoint
"origin" and records both (vault info shows them as "origin"): ` + "`avfs apply`" + `
then writes the vault's changes since that checkpoint back into HOST_DIR.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if err := q.Check(); err != nil {
				return nil, err
			}
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			if !cmd.Flags().Changed("backend") {
				backend = "" // the home's: a store's vaults are in its engine
			}
			v, err := h.Create(args[0], registry.CreateOptions{Engine: backend, Quota: q})
			if err != nil {
				return nil, err
			}
			defer v.Close()
			if from != "" {
				if err := a.importOrigin(v, from); err != nil {
					v.Close()
					return nil, errors.Join(err, h.Delete(args[0])) // a failed create leaves no vault
				}
			}
			if use {
				if err := h.Use(args[0]); err != nil {
					return nil, err
				}
			}
			return describe(h, v)
		}),
	}
	f := c.Flags()
	f.StringVar(&backend, "backend", engines.Default, "storage engine: "+strings.Join(engines.Names(), ", "))
	f.BoolVar(&use, "use", false, "make the new vault the current vault")
	f.StringVar(&from, "from", "", "import this host directory and record it as the vault's origin")
	f.Int64Var(&q.MaxSizeMB, "max-size-mb", 0, "quota: total size of file data, in MiB")
	f.Int64Var(&q.MaxFiles, "max-files", 0, "quota: number of files, directories and links")
	f.Int64Var(&q.MaxFileSizeMB, "max-file-size-mb", 0, "quota: size of one file, in MiB")
	_ = c.RegisterFlagCompletionFunc("backend", cobra.FixedCompletions(engines.Names(), cobra.ShellCompDirectiveNoFileComp))
	return c
}

// vaultListEntry is one vault of vault list. A vault that cannot be
// opened is listed with its error rather than failing the whole list.
type vaultListEntry struct {
	Name          string     `json:"name"`
	VaultID       string     `json:"vault_id,omitempty"`
	Backend       string     `json:"backend"`
	Path          string     `json:"path"`
	FormatVersion int        `json:"format_version,omitempty"`
	CreatedAt     *time.Time `json:"created_at,omitempty"`
	Current       bool       `json:"current"`
	Parent        *string    `json:"parent"`
	Error         errs.Kind  `json:"error,omitempty"`
	Message       string     `json:"message,omitempty"`
}

type vaultList struct {
	Vaults  []vaultListEntry `json:"vaults"`
	Current *string          `json:"current"`
}

func (r vaultList) human(w io.Writer) {
	if len(r.Vaults) == 0 {
		fmt.Fprintln(w, "no vaults; create one with `avfs vault create NAME`")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range r.Vaults {
		mark := " "
		if v.Current {
			mark = "*"
		}
		note := ""
		switch {
		case v.Error != "":
			note = fmt.Sprintf("%s: %s", v.Error, v.Message)
		case v.Parent != nil:
			note = "fork of " + *v.Parent
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\n", mark, v.Name, v.Backend, note)
	}
	tw.Flush()
}

func (a *app) vaultListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the vaults of the home; * marks the current one",
		Args:    exactArgs(0),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			names, err := vaultNames(h)
			if err != nil {
				return nil, err
			}
			r := vaultList{Vaults: []vaultListEntry{}}
			if cur, err := h.Current(); err == nil {
				r.Current = &cur
			}
			for _, name := range names {
				r.Vaults = append(r.Vaults, listEntry(h, name, r.Current))
			}
			return r, nil
		}),
	}
}

func listEntry(h *registry.Home, name string, current *string) vaultListEntry {
	e := vaultListEntry{Name: name, Path: h.Path(name), Current: current != nil && *current == name}
	v, err := h.Open(name)
	var info registry.Info
	if err == nil {
		info, err = h.Describe(v)
		v.Close()
	}
	if err != nil {
		e.Error = errs.KindOf(err)
		e.Message, _ = message(err)
		return e
	}
	created := utc(info.CreatedAt)
	e.VaultID, e.Backend, e.FormatVersion, e.CreatedAt = info.ID, info.Backend, info.FormatVersion, &created
	if info.Parent != "" {
		e.Parent = &info.Parent
	}
	return e
}

func (a *app) vaultInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info [NAME]",
		Short: "Describe a vault (default: the selected one)",
		Args:  rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, v, err := a.openVault(argOr(args, 0, ""))
			if err != nil {
				return nil, err
			}
			defer v.Close()
			r, err := describe(h, v)
			if err != nil {
				return r, err
			}
			sp, err := v.Space()
			r.Space = &sp
			return r, err
		}),
		ValidArgsFunction: a.completeVaults,
	}
}

func argOr(args []string, i int, def string) string {
	if i < len(args) {
		return args[i]
	}
	return def
}

func (a *app) vaultUseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make NAME the current vault",
		Long: `Make NAME the current vault: the one commands work on when neither --vault
nor $AVFS_VAULT names another.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			v, err := h.Open(args[0])
			if err != nil {
				return nil, err
			}
			defer v.Close()
			if err := h.Use(args[0]); err != nil {
				return nil, err
			}
			return describe(h, v)
		}),
		ValidArgsFunction: a.completeVaults,
	}
}

type forkResult struct {
	Source     string  `json:"source"`
	Name       string  `json:"name"`
	VaultID    string  `json:"vault_id"`
	Path       string  `json:"path"`
	Backend    string  `json:"backend"`
	Current    bool    `json:"current"`
	DurationMS float64 `json:"duration_ms"`
}

func (r forkResult) human(w io.Writer) {
	fmt.Fprintf(w, "forked %s into %s in %.1f ms\n", r.Source, r.Name, r.DurationMS)
	if r.Current {
		fmt.Fprintf(w, "%s is now the current vault\n", r.Name)
	}
}

func (a *app) vaultForkCmd() *cobra.Command {
	var use bool
	c := &cobra.Command{
		Use:   "fork SOURCE NAME",
		Short: "Fork vault SOURCE into a new vault NAME, in O(1)",
		Long: `Fork vault SOURCE into a new vault NAME. Nothing is copied: the fork stands
on SOURCE's frozen layers, so it costs milliseconds whatever SOURCE holds.
SOURCE cannot be deleted while forks stand on it.`,
		Args: exactArgs(2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			start := time.Now()
			v, err := h.Fork(args[0], args[1])
			took := time.Since(start)
			if err != nil {
				return nil, err
			}
			defer v.Close()
			if use {
				if err := h.Use(args[1]); err != nil {
					return nil, err
				}
			}
			return forkResult{Source: args[0], Name: args[1], VaultID: v.ID(), Path: v.Engine().Path(),
				Backend: v.Engine().Name(), Current: use, DurationMS: ms(took)}, nil
		}),
		ValidArgsFunction: a.completeVaults,
	}
	c.Flags().BoolVar(&use, "use", false, "make the fork the current vault")
	return c
}

type deleteResult struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	Deleted     bool   `json:"deleted"`
	Checkpoints int    `json:"checkpoints"`
	FileSize    int64  `json:"file_size"`
}

func (r deleteResult) human(w io.Writer) {
	fmt.Fprintf(w, "deleted vault %s (%s, %d checkpoints)\n", r.Name, sizeString(r.FileSize), r.Checkpoints)
}

func (a *app) vaultDeleteCmd() *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a vault and all its checkpoints (needs --yes)",
		Long: `Delete vault NAME: its file, every checkpoint in it, and nothing else.

Without --yes nothing is deleted: on a terminal avfs says what would go; in
every case the command fails with ConfirmationRequired (exit code 13), so a
script that forgot --yes never deletes by accident. A vault that forks stand
on is refused with VaultHasForks, naming them: delete the forks first.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			name := args[0]
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			v, err := h.Open(name)
			if err != nil {
				return nil, err
			}
			r := deleteResult{Name: name, Path: v.Engine().Path(), FileSize: fileSize(v.Engine().Path())}
			cps, err := v.Checkpoints()
			forks, ferr := h.LiveForks(v)
			v.Close()
			if err != nil {
				return nil, err
			}
			if ferr != nil {
				return nil, ferr
			}
			r.Checkpoints = len(cps)
			if len(forks) > 0 {
				return nil, &errs.Error{Kind: errs.VaultHasForks, Op: "vault delete", Vault: name,
					Err:   fmt.Errorf("vault %q has forks: %s", name, strings.Join(forks, ", ")),
					Hint:  "delete the forks first",
					Extra: map[string]any{"forks": forks}}
			}
			if !yes {
				if !a.jsonOut && a.env.IsTerminal(a.env.Stdin) {
					fmt.Fprintf(a.env.Stderr, "would delete vault %s:\n  file         %s (%s)\n  checkpoints  %d\n",
						name, r.Path, sizeString(r.FileSize), r.Checkpoints)
				}
				return nil, &errs.Error{Kind: errs.ConfirmationRequired, Op: "vault delete", Vault: name,
					Err:   fmt.Errorf("not deleted without --yes (%s, %d checkpoints would go)", sizeString(r.FileSize), r.Checkpoints),
					Hint:  "run again with --yes to delete it",
					Extra: map[string]any{"would_delete": r}}
			}
			if err := h.Delete(name); err != nil {
				return nil, err
			}
			r.Deleted = true
			return r, nil
		}),
		ValidArgsFunction: a.completeVaults,
	}
	c.Flags().BoolVarP(&yes, "yes", "y", false, "really delete")
	return c
}

// importOrigin imports hostDir into v, saves checkpoint "origin" and
// records both as v's origin.
func (a *app) importOrigin(v *vfs.Vault, hostDir string) error {
	abs, err := filepath.Abs(hostDir)
	if err != nil {
		return hostErr("vault create", hostDir, err)
	}
	if _, err := a.importTree(v, abs, "/"); err != nil {
		return err
	}
	_, err = recordOrigin(v, abs)
	return err
}

// recordOrigin saves a checkpoint of what v holds now, just imported from
// host directory abs, and records both as v's origin, replacing any
// before: the newest import is what the host directory holds. The
// checkpoint is "origin", or "origin-N" when that name is taken.
func recordOrigin(v *vfs.Vault, abs string) (*vfs.Origin, error) {
	name := "origin"
	for i := 2; ; i++ {
		cp, err := v.SaveCheckpoint(name, "imported from "+abs)
		if errs.Is(err, errs.AlreadyExists) && i < 1000 {
			name = fmt.Sprintf("origin-%d", i)
			continue
		}
		if err != nil {
			return nil, err
		}
		o := vfs.Origin{HostDir: abs, Checkpoint: cp.Name, RecordedAt: cp.CreatedAt}
		return &o, v.SetOrigin(o)
	}
}

// settingKeys are the keys of vault set.
var settingKeys = []string{"run-checkpoints"}

func runCheckpointsString(n int) string {
	if n == 0 {
		return "all"
	}
	return strconv.Itoa(n)
}

func (a *app) vaultSetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set NAME SETTING...",
		Short: "Set a vault's own options",
		Long: `Set options of vault NAME, kept in the vault itself, and print its info.
Each SETTING is KEY=VALUE. Keys:
  run-checkpoints  how many proxy runs' checkpoints the vault keeps: after
                   each run the oldest beyond it are pruned and their runs
                   can no longer be undone (default 50; 0 keeps all)
A bad key or value is InvalidInput and changes nothing.`,
		Args: rangeArgs(2, 1+len(settingKeys)),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, v, err := a.openVault(args[0])
			if err != nil {
				return nil, err
			}
			defer v.Close()
			s, err := v.Settings()
			if err != nil {
				return nil, err
			}
			for _, kv := range args[1:] {
				k, val, ok := strings.Cut(kv, "=")
				switch {
				case !ok:
					return nil, invalidf("vault set", "want KEY=VALUE, not %q (keys: %s)", kv, strings.Join(settingKeys, ", "))
				case strings.ReplaceAll(k, "_", "-") == "run-checkpoints":
					n, err := strconv.Atoi(val)
					if err != nil || n < 0 {
						return nil, invalidf("vault set", "run-checkpoints must be 0 (keep all) or a positive number, not %q", val)
					}
					s.RunCheckpoints = n
				default:
					return nil, invalidf("vault set", "unknown key %q (keys: %s)", k, strings.Join(settingKeys, ", "))
				}
			}
			if err := v.SetSettings(s); err != nil {
				return nil, err
			}
			return describe(h, v)
		}),
		ValidArgsFunction: a.completeVaults,
	}
}
