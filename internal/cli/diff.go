package cli

import (
	"fmt"
	"io"
	"strings"

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
		writeStat(w, r.patches)
	}
	if r.patch {
		if r.stat {
			fmt.Fprintln(w)
		}
		for _, p := range r.patches {
			io.WriteString(w, p.Text)
		}
	}
	if !r.stat && !r.patch {
		l := diffResult{From: r.From, To: r.To}
		for _, c := range r.Changes {
			l.Changes = append(l.Changes, c.change)
		}
		l.human(w)
	}
}

// writeStat prints git's --stat: a line per path git keeps, with a bar of
// + and - scaled to 50 columns, and the totals.
func writeStat(w io.Writer, ps []vfs.FilePatch) {
	width, most := 0, 0
	var shown []vfs.FilePatch
	for _, p := range ps {
		if p.Text == "" {
			continue
		}
		shown = append(shown, p)
		width = max(width, len(strings.TrimPrefix(p.Path, "/")))
		most = max(most, p.Insertions+p.Deletions)
	}
	digits := len(fmt.Sprint(most))
	ins, del := 0, 0
	for _, p := range shown {
		name := strings.TrimPrefix(p.Path, "/")
		if p.Binary {
			fmt.Fprintf(w, " %-*s | %*s %d -> %d bytes\n", width, name, digits, "Bin", p.SizeBefore, p.SizeAfter)
			continue
		}
		n := p.Insertions + p.Deletions
		plus, minus := p.Insertions, p.Deletions
		if most > 50 {
			plus, minus = scaled(p.Insertions, most), scaled(p.Deletions, most)
		}
		fmt.Fprintf(w, " %-*s | %*d %s%s\n", width, name, digits, n, strings.Repeat("+", plus), strings.Repeat("-", minus))
		ins += p.Insertions
		del += p.Deletions
	}
	files := "files"
	if len(shown) == 1 {
		files = "file"
	}
	fmt.Fprintf(w, " %d %s changed", len(shown), files)
	if ins > 0 || del == 0 {
		fmt.Fprintf(w, ", %d insertion%s(+)", ins, plural(ins))
	}
	if del > 0 {
		fmt.Fprintf(w, ", %d deletion%s(-)", del, plural(del))
	}
	fmt.Fprintln(w)
}

// scaled is n of most as a bar of 50 columns, at least one for n > 0.
func scaled(n, most int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*50/most)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (a *app) diffCmd() *cobra.Command {
	var patch, stat bool
	return a.withDiffFlags(&cobra.Command{
		Use:   "diff [FROM [TO]]",
		Short: "Show what changed between two states, as a git patch",
		Long: `Compare two states: FROM defaults to the latest checkpoint of the selected
vault and TO to its working state, as for checkpoint diff. ` + refHelp + `

--patch prints a git-format patch that "git apply" takes on a tree holding
FROM (new and deleted files, mode changes, symlinks; "Binary files ...
differ" for content git would call binary or that is over 16 MiB).
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
			changes, err := vfs.Diff(from.StateRef, to.StateRef)
			if err != nil {
				return nil, err
			}
			res := contentDiff{From: from.Name, To: to.Name, Changes: []contentChange{}, Summary: map[string]int{},
				patch: patch, stat: stat}
			for _, k := range []vfs.ChangeKind{vfs.Added, vfs.Modified, vfs.Deleted, vfs.TypeChanged, vfs.ModeChanged} {
				res.Summary[string(k)] = 0
			}
			if patch || stat || a.jsonOut {
				if res.patches, err = vfs.Patches(from.StateRef, to.StateRef, changes); err != nil {
					return nil, err
				}
			}
			for i, c := range changes {
				cc := contentChange{change: change{Path: c.Path, Kind: string(c.Kind), Type: c.Type,
					SizeBefore: c.SizeBefore, SizeAfter: c.SizeAfter}}
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
