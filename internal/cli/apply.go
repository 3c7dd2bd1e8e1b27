package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/apply"
	"github.com/agentvfs/agentvfs/internal/refs"
)

type applyResult apply.Result

func (r applyResult) human(w io.Writer) {
	for _, e := range r.Applied {
		fmt.Fprintf(w, "%s %s\n", e.Kind, e.Path)
	}
	for _, c := range r.Conflicts {
		fmt.Fprintf(w, "CONFLICT %s: %s\n", c.Path, c.Reason)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Path, s.Reason)
	}
	verb := "applied"
	if r.DryRun {
		verb = "would apply"
	}
	fmt.Fprintf(w, "%s %d changes to %s, %d conflicts\n", verb, len(r.Applied), r.HostDir, len(r.Conflicts))
}

func (a *app) applyCmd() *cobra.Command {
	var from, to string
	var dry, force bool
	c := &cobra.Command{
		Use:   "apply HOST_DIR",
		Short: "Write a vault's changes into a host directory",
		Long: `Write the changes between FROM (default: the recorded origin of the selected
vault, or of its parent for a fork: see vault create --from) and TO
(default: the working state) into HOST_DIR. ` + refHelp + `

A host file that no longer holds what FROM held is a conflict: reported
and left alone, unless --force. Files already as TO are skipped. Modes are
kept (not setuid or setgid); nothing is written outside HOST_DIR: no
symlink in the host tree is followed, files are created with O_NOFOLLOW.
Applying the output of "avfs diff FROM TO --patch" with git apply gives
the same tree.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			_, r, err := a.resolver()
			if err != nil {
				return nil, err
			}
			defer r.Close()
			if from == "" {
				if from, err = apply.Origin(r); err != nil {
					return nil, err
				}
			}
			fs, err := r.Resolve(from)
			if err != nil {
				return nil, err
			}
			ts, err := r.Resolve(orDefault(to, refs.Working))
			if err != nil {
				return nil, err
			}
			res, err := apply.Apply(a.ctx, args[0], fs, ts, apply.Options{DryRun: dry, Force: force})
			if err != nil {
				return nil, err
			}
			return applyResult(*res), nil
		}),
	}
	c.Flags().StringVar(&from, "from", "", "the REF the host directory holds (default: the recorded origin)")
	c.Flags().StringVar(&to, "to", "", "the REF to write (default: @, the working state)")
	c.Flags().BoolVar(&dry, "dry-run", false, "report what would be written and what conflicts, write nothing")
	c.Flags().BoolVarP(&force, "force", "f", false, "overwrite host files that no longer match FROM")
	return c
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
