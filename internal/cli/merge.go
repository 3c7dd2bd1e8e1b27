package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

type mergeResult struct{ *vfs.MergeResult }

func (r mergeResult) human(w io.Writer) {
	for _, c := range r.Applied {
		fmt.Fprintf(w, "%s %s\n", c.Kind, c.Path)
	}
	for _, c := range r.Conflicts {
		fmt.Fprintf(w, "CONFLICT (%s) %s: ours %s, theirs %s\n", c.Kind, c.Path, c.Ours, c.Theirs)
	}
	switch {
	case r.Merged:
		fmt.Fprintf(w, "merged %s into %s (undo: avfs checkpoint restore --vault %s %s)\n", r.Source, r.Target, r.Target, *r.Checkpoint)
	case r.DryRun:
		fmt.Fprintf(w, "dry run: %s not changed\n", r.Target)
	case len(r.Conflicts) > 0:
		fmt.Fprintf(w, "not merged: %d conflicts; %s not changed (--on-conflict ours, theirs or markers resolves them)\n", len(r.Conflicts), r.Target)
	default:
		fmt.Fprintf(w, "nothing to merge from %s into %s\n", r.Source, r.Target)
	}
}

func (a *app) vaultMergeCmd() *cobra.Command {
	var into, on string
	var dry bool
	c := &cobra.Command{
		Use:   "merge SOURCE",
		Short: "Merge a fork's working state back into its parent (or --into TARGET)",
		Long: `Three-way merge of SOURCE's working state into TARGET's (default: SOURCE's
parent), from their common ancestor layer. Paths only SOURCE changed take
its version; the same change on both sides is not a conflict; text files
both sides changed merge by lines. What still conflicts is reported as
data (both_modified, modify_delete, add_add, type_changed) and handled by
--on-conflict:
  fail     (default) change nothing when anything conflicts
  ours     keep TARGET's version
  theirs   take SOURCE's version
  markers  write git-style conflict markers into text files (TARGET's
           version of the others)
TARGET gets a checkpoint first ("checkpoint" in the result), so
"avfs checkpoint restore" undoes the merge; the merge itself is one
transaction. Merging again changes nothing. Extended attributes are not
merged and hard links merge as separate files.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			if err := registry.CheckName(args[0]); err != nil {
				return nil, err
			}
			src, err := h.Open(args[0])
			if err != nil {
				return nil, err
			}
			defer src.Close()
			if into != "" {
				if err := registry.CheckName(into); err != nil {
					return nil, err
				}
			}
			if into, err = vfs.MergeTarget(src, into); err != nil {
				return nil, err
			}
			dst, err := h.Open(into)
			if err != nil {
				return nil, err
			}
			defer dst.Close()
			res, err := vfs.Merge(src, dst, vfs.OnConflict(on), dry)
			if err != nil {
				return nil, err
			}
			return mergeResult{res}, nil
		}),
		ValidArgsFunction: a.completeVaults,
	}
	c.Flags().StringVar(&into, "into", "", "the vault to merge into (default: SOURCE's parent)")
	c.Flags().StringVar(&on, "on-conflict", string(vfs.ConflictFail), "fail, ours, theirs or markers")
	c.Flags().BoolVar(&dry, "dry-run", false, "report what would be applied and what conflicts, change nothing")
	return c
}
