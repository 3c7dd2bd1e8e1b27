package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// contentChange is one change of avfs diff --json: checkpoint diff's
// change with its patch.
type contentChange struct {
	change
	Patch      *string `json:"patch"` // null: binary, or nothing git keeps (a directory)
	Binary     bool    `json:"binary"`
	Insertions int     `json:"insertions"`
	Deletions  int     `json:"deletions"`
}

type contentDiff struct {
	From    string          `json:"from"`
	To      string          `json:"to"`
	Changes []contentChange `json:"changes"`
	Summary map[string]int  `json:"summary"` // count of changes per kind
	patch   bool
	stat    bool
	patches []vfs.FilePatch
}

func (r contentDiff) human(w io.Writer) {
	if r.stat {
		vfs.WriteStat(w, r.patches)
	}
	if r.patch {
		if r.stat {
			fmt.Fprintln(w)
		}
		io.WriteString(w, vfs.PatchText(r.patches))
	}
	if !r.stat && !r.patch {
		l := diffResult{From: r.From, To: r.To}
		for _, c := range r.Changes {
			l.Changes = append(l.Changes, c.change)
		}
		l.human(w)
	}
}

func (a *app) diffCmd() *cobra.Command {
	var patch, stat bool
	return a.withDiffFlags(&cobra.Command{
		Use:   "diff [FROM [TO]]",
		Short: "Show what changed between two states, as a git patch",
		Long: `Compare two states: FROM defaults to the latest checkpoint of the selected
vault and TO to its working state, as for checkpoint diff. ` + refHelp + `

--patch prints a git-format patch that "git apply" takes on a tree holding
FROM (new and deleted files, mode changes, symlinks, renames; a git
binary patch for content git would call binary, "Binary files ... differ"
for content over 16 MiB). A deleted and an added file are one rename when
their content is the same (told from the chunk hashes, nothing read) or,
among at most 256 files of at most 1 MiB, when half their bytes are in
lines both hold (git's -M50%): kind "renamed", with "from" the old path.
Directories, device files and modes other than the owner's execute bit
have no form in a patch. --stat prints git's stat lines. With --json,
each change carries its patch (null when binary or absent), binary and
the lines inserted and deleted.

Only the layers that differ are read to find the changed paths; unchanged
files are never read. Text is compared line by line with Myers' algorithm
(github.com/sergi/go-diff).`,
		Args: rangeArgs(0, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			_, r, err := a.resolver()
			if err != nil {
				return nil, err
			}
			defer r.Close()
			var from, to refs.State
			if len(args) > 0 {
				if from, err = r.Resolve(args[0]); err != nil {
					return nil, err
				}
			} else {
				cur, err := r.Resolve(refs.Working)
				if err != nil {
					return nil, err
				}
				cps, err := cur.Vault.Checkpoints()
				if err != nil {
					return nil, err
				}
				if len(cps) == 0 {
					return nil, &errs.Error{Kind: errs.CheckpointNotFound, Op: "diff", Vault: cur.Vault.Name(),
						Err:  fmt.Errorf("vault %q has no checkpoint to compare with", cur.Vault.Name()),
						Hint: "save one with `avfs checkpoint save`, or name FROM"}
				}
				if from, err = r.Resolve("vault:" + cur.Vault.Name() + "@" + cps[len(cps)-1].Name); err != nil {
					return nil, err
				}
			}
			if to, err = r.Resolve(argOr(args, 1, refs.Working)); err != nil {
				return nil, err
			}
			changes, patches, err := vfs.ContentDiff(from.StateRef, to.StateRef, patch || stat || a.jsonOut)
			if err != nil {
				return nil, err
			}
			res := contentDiff{From: from.Name, To: to.Name, Changes: []contentChange{}, Summary: map[string]int{},
				patch: patch, stat: stat}
			for _, k := range []vfs.ChangeKind{vfs.Added, vfs.Modified, vfs.Deleted, vfs.Renamed, vfs.TypeChanged, vfs.ModeChanged} {
				res.Summary[string(k)] = 0
			}
			res.patches = patches
			for i, c := range changes {
				cc := contentChange{change: change{Path: c.Path, Kind: string(c.Kind), Type: c.Type,
					SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter}}
				if c.From != "" {
					cc.From = &c.From
				}
				if res.patches != nil {
					p := res.patches[i]
					cc.Binary, cc.Insertions, cc.Deletions = p.Binary, p.Insertions, p.Deletions
					if p.Text != "" && !p.Binary {
						cc.Patch = &p.Text
					}
				}
				res.Changes = append(res.Changes, cc)
				res.Summary[string(c.Kind)]++
			}
			return res, nil
		}),
		ValidArgsFunction: a.completeCheckpoints,
	}, &patch, &stat)
}

func (a *app) withDiffFlags(c *cobra.Command, patch, stat *bool) *cobra.Command {
	c.Flags().BoolVarP(patch, "patch", "p", false, "print a git-format patch")
	c.Flags().BoolVar(stat, "stat", false, "print git-style stat lines")
	return c
}
