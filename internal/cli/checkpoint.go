package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func (a *app) checkpointCmd() *cobra.Command {
	c := a.group("checkpoint", "Save, list, restore, compare and delete checkpoints",
		a.cpSaveCmd(), a.cpListCmd(), a.cpInfoCmd(), a.cpRestoreCmd(), a.cpDeleteCmd(), a.cpPruneCmd(), a.cpDiffCmd())
	c.Aliases = []string{"snapshot"}
	c.Long = `A checkpoint is a named, frozen state of a vault. Saving and restoring cost
milliseconds whatever the vault holds; a restore is exact. "snapshot" is
another name for this command. prune deletes old ones by count and age.`
	return c
}

// checkpointInfo is the JSON of checkpoint save and info, and one item of
// checkpoint list.
type checkpointInfo struct {
	Name      string    `json:"name"`
	Vault     string    `json:"vault"`
	CreatedAt time.Time `json:"created_at"`
	Message   string    `json:"message"`
	Bytes     int64     `json:"bytes"` // usage of the saved state
	Files     int64     `json:"files"`
}

func cpInfo(vault string, cp vfs.Checkpoint) checkpointInfo {
	return checkpointInfo{Name: cp.Name, Vault: vault, CreatedAt: utc(cp.CreatedAt), Message: cp.Message,
		Bytes: cp.Bytes, Files: cp.Files}
}

func (r checkpointInfo) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\nvault\t%s\ncreated\t%s\n", r.Name, r.Vault, r.CreatedAt.Format(time.RFC3339))
	if r.Message != "" {
		fmt.Fprintf(tw, "message\t%s\n", r.Message)
	}
	fmt.Fprintf(tw, "usage\t%s in %d files\n", sizeString(r.Bytes), r.Files)
	tw.Flush()
}

type saveResult struct {
	checkpointInfo
	DurationMS float64 `json:"duration_ms"`
}

func (r saveResult) human(w io.Writer) {
	fmt.Fprintf(w, "saved checkpoint %s of %s in %.1f ms\n", r.Name, r.Vault, r.DurationMS)
}

func (a *app) cpSaveCmd() *cobra.Command {
	var msg string
	c := &cobra.Command{
		Use:   "save [NAME]",
		Short: "Save the working state as a checkpoint, in O(1)",
		Long: `Freeze the working state of the selected vault as checkpoint NAME (a name is
generated when left out). Names are 1-128 characters of A-Z a-z 0-9 _ . -
not starting with - or .`,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				name := argOr(args, 0, "")
				if name != "" {
					if err := checkpointName("checkpoint save", name); err != nil {
						return nil, err
					}
				}
				start := time.Now()
				cp, err := v.SaveCheckpoint(name, msg)
				if err != nil {
					return nil, err
				}
				return saveResult{cpInfo(v.Name(), cp), ms(time.Since(start))}, nil
			})
		}),
	}
	c.Flags().StringVarP(&msg, "message", "m", "", "a note kept with the checkpoint")
	return c
}

type checkpointList struct {
	Vault       string           `json:"vault"`
	Checkpoints []checkpointInfo `json:"checkpoints"`
}

func (r checkpointList) human(w io.Writer) {
	if len(r.Checkpoints) == 0 {
		fmt.Fprintf(w, "no checkpoints in %s\n", r.Vault)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range r.Checkpoints {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.CreatedAt.Local().Format("2006-01-02 15:04:05"),
			sizeString(c.Bytes), c.Message)
	}
	tw.Flush()
}

func (a *app) cpListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the checkpoints of the selected vault, oldest first",
		Args:    exactArgs(0),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				cps, err := v.Checkpoints()
				if err != nil {
					return nil, err
				}
				r := checkpointList{Vault: v.Name(), Checkpoints: []checkpointInfo{}}
				for _, cp := range cps {
					r.Checkpoints = append(r.Checkpoints, cpInfo(v.Name(), cp))
				}
				return r, nil
			})
		}),
	}
}

func (a *app) cpInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info NAME",
		Short: "Describe one checkpoint",
		Args:  exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				cp, err := v.GetCheckpoint(args[0])
				if err != nil {
					return nil, err
				}
				return cpInfo(v.Name(), cp), nil
			})
		}),
		ValidArgsFunction: a.completeCheckpoints,
	}
}

type restoreResult struct {
	Name       string  `json:"name"`
	Vault      string  `json:"vault"`
	DurationMS float64 `json:"duration_ms"`
}

func (r restoreResult) human(w io.Writer) {
	fmt.Fprintf(w, "restored %s to checkpoint %s in %.1f ms\n", r.Vault, r.Name, r.DurationMS)
}

func (a *app) cpRestoreCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restore NAME",
		Short: "Make a checkpoint the working state again, in O(1)",
		Long: `Make checkpoint NAME the working state of the selected vault. Changes made
since the last save are discarded; every checkpoint stays available.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				start := time.Now()
				if err := v.RestoreCheckpoint(args[0]); err != nil {
					return nil, err
				}
				return restoreResult{Name: args[0], Vault: v.Name(), DurationMS: ms(time.Since(start))}, nil
			})
		}),
		ValidArgsFunction: a.completeCheckpoints,
	}
}

type cpDeleteResult struct {
	Name    string `json:"name"`
	Vault   string `json:"vault"`
	Deleted bool   `json:"deleted"`
}

func (r cpDeleteResult) human(io.Writer) {}

func (a *app) cpDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Forget a checkpoint; `avfs compact` frees what only it held",
		Args:  exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				if err := v.DeleteCheckpoint(args[0]); err != nil {
					return nil, err
				}
				return cpDeleteResult{Name: args[0], Vault: v.Name(), Deleted: true}, nil
			})
		}),
		ValidArgsFunction: a.completeCheckpoints,
	}
}

func (a *app) completeCheckpoints(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	var names []string
	_, _ = a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
		cps, err := v.Checkpoints()
		for _, cp := range cps {
			names = append(names, cp.Name)
		}
		return nil, err
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

type change struct {
	Path       string `json:"path"`
	Kind       string `json:"kind"`
	Type       string `json:"type"`
	SizeBefore int64  `json:"size_before"`
	SizeAfter  int64  `json:"size_after"`
	// From is the old path of a rename (avfs diff), null otherwise, as in
	// proxy exec's changes.
	From *string `json:"from"`
}

type diffResult struct {
	From    string         `json:"from"`
	To      string         `json:"to"`
	Changes []change       `json:"changes"`
	Summary map[string]int `json:"summary"` // count of changes per kind
}

func (r diffResult) human(w io.Writer) {
	marks := map[string]string{"added": "A", "modified": "M", "deleted": "D", "renamed": "R", "type_changed": "T", "mode_changed": "m"}
	for _, c := range r.Changes {
		if c.From != nil {
			fmt.Fprintf(w, "%s %s -> %s\n", marks[c.Kind], *c.From, c.Path)
			continue
		}
		fmt.Fprintf(w, "%s %s\n", marks[c.Kind], c.Path)
	}
	if len(r.Changes) == 0 {
		fmt.Fprintf(w, "no changes between %s and %s\n", r.From, r.To)
	}
}

// checkpointName validates a checkpoint name, for op.
func checkpointName(op, name string) error {
	err := vfs.CheckName("checkpoint", name)
	var e *errs.Error
	if errors.As(err, &e) && e.Op == "" {
		e.Op = op
	}
	return err
}

// stateRef is a parsed diff argument: a checkpoint of a vault, or a
// vault's working state when checkpoint is empty.
type stateRef struct {
	vault, checkpoint string
}

// String is the canonical form printed in the diff's from and to.
func (s stateRef) String() string {
	if s.checkpoint == "" {
		return "vault:" + s.vault
	}
	return "vault:" + s.vault + "@" + s.checkpoint
}

// parseRef reads CHECKPOINT (of the selected vault), vault:NAME (its
// working state) or vault:NAME@CHECKPOINT.
func parseRef(arg, selected string) (stateRef, error) {
	rest, ok := strings.CutPrefix(arg, "vault:")
	if !ok {
		return stateRef{vault: selected, checkpoint: arg}, checkpointName("checkpoint diff", arg)
	}
	name, cp, hasCP := strings.Cut(rest, "@")
	if err := registry.CheckName(name); err != nil {
		return stateRef{}, err
	}
	if hasCP {
		if err := checkpointName("checkpoint diff", cp); err != nil {
			return stateRef{}, err
		}
	}
	return stateRef{vault: name, checkpoint: cp}, nil
}

func (a *app) cpDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff [FROM [TO]]",
		Short: "List the paths that differ between two states",
		Long: `List the paths that differ between two states, sorted by path. A state is
  CHECKPOINT              a checkpoint of the selected vault
  vault:NAME              the working state of vault NAME
  vault:NAME@CHECKPOINT   a checkpoint of vault NAME
FROM defaults to the latest checkpoint of the selected vault and TO to its
working state, so a bare diff shows what changed since the last save; a
fork is compared with its parent by "diff vault:PARENT vault:FORK".
Kinds are added, modified, deleted, type_changed and mode_changed; only
the layers that differ are read, never file data.`,
		Args: rangeArgs(0, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if len(args) == 2 && strings.HasPrefix(args[0], "vault:") && strings.HasPrefix(args[1], "vault:") {
				// Both states name their vault: none need be selected.
				return a.diffNamed(args)
			}
			return a.withVault(func(h *registry.Home, v *vfs.Vault) (any, error) {
				return diffStates(h, v, args)
			})
		}),
		ValidArgsFunction: a.completeCheckpoints,
	}
}

// diffNamed compares two states that each name their vault.
func (a *app) diffNamed(args []string) (any, error) {
	h, err := a.home()
	if err != nil {
		return nil, err
	}
	from, err := parseRef(args[0], "")
	if err != nil {
		return nil, err
	}
	v, err := h.Open(from.vault)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return diffStates(h, v, args)
}

func diffStates(h *registry.Home, v *vfs.Vault, args []string) (any, error) {
	var from, to stateRef
	var err error
	if len(args) > 0 {
		if from, err = parseRef(args[0], v.Name()); err != nil {
			return nil, err
		}
	} else {
		cps, err := v.Checkpoints()
		if err != nil {
			return nil, err
		}
		if len(cps) == 0 {
			return nil, &errs.Error{Kind: errs.CheckpointNotFound, Op: "checkpoint diff", Vault: v.Name(),
				Err:  fmt.Errorf("vault %q has no checkpoint to compare with", v.Name()),
				Hint: "save one with `avfs checkpoint save`, or name FROM"}
		}
		from = stateRef{vault: v.Name(), checkpoint: cps[len(cps)-1].Name}
	}
	to = stateRef{vault: v.Name()}
	if len(args) > 1 {
		if to, err = parseRef(args[1], v.Name()); err != nil {
			return nil, err
		}
	}
	open := map[string]*vfs.Vault{v.Name(): v}
	defer func() {
		for name, o := range open {
			if name != v.Name() {
				o.Close()
			}
		}
	}()
	ref := func(s stateRef) (vfs.StateRef, error) {
		o, ok := open[s.vault]
		if !ok {
			var err error
			if o, err = h.Open(s.vault); err != nil {
				return vfs.StateRef{}, err
			}
			open[s.vault] = o
		}
		r := vfs.StateRef{Vault: o, Checkpoint: s.checkpoint}
		return r, r.Check()
	}
	fr, err := ref(from)
	if err != nil {
		return nil, err
	}
	tr, err := ref(to)
	if err != nil {
		return nil, err
	}
	changes, err := vfs.Diff(fr, tr)
	if err != nil {
		return nil, err
	}
	r := diffResult{From: from.String(), To: to.String(), Changes: []change{}, Summary: map[string]int{}}
	for _, k := range []vfs.ChangeKind{vfs.Added, vfs.Modified, vfs.Deleted, vfs.TypeChanged, vfs.ModeChanged} {
		r.Summary[string(k)] = 0
	}
	for _, c := range changes {
		r.Changes = append(r.Changes, change{Path: c.Path, Kind: string(c.Kind), Type: c.Type,
			SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter})
		r.Summary[string(c.Kind)]++
	}
	return r, nil
}
