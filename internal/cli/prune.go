package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// pruneResult is the JSON of checkpoint prune.
type pruneResult struct {
	Vault   string               `json:"vault"`
	DryRun  bool                 `json:"dry_run"`
	Deleted []string             `json:"deleted"`
	Kept    []vfs.KeptCheckpoint `json:"kept"`
	vfs.CompactStats
	ChunksFreed    int     `json:"chunks_freed"`
	BytesFreed     int64   `json:"bytes_freed"`
	BytesReclaimed int64   `json:"bytes_reclaimed"`
	DurationMS     float64 `json:"duration_ms"`
}

func (r pruneResult) human(w io.Writer) {
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	for _, n := range r.Deleted {
		fmt.Fprintf(w, "%s %s\n", verb, n)
	}
	fmt.Fprintf(w, "%s %d checkpoint(s) of %s, kept %d", verb, len(r.Deleted), r.Vault, len(r.Kept))
	if !r.DryRun && len(r.Deleted) > 0 {
		fmt.Fprintf(w, ", freed %s", sizeString(r.BytesFreed))
	}
	fmt.Fprintln(w)
}

func (a *app) cpPruneCmd() *cobra.Command {
	var keep int
	var olderThan string
	var runsOnly, dryRun bool
	c := &cobra.Command{
		Use:   "prune [VAULT]",
		Short: "Delete old checkpoints and free what only they held",
		Long: `Delete the checkpoints of VAULT (default: the selected vault) beyond the
newest --keep N and older than --older-than D (Go durations such as 36h,
or days: 7d, 1d12h); with both, a checkpoint goes when it is past the
newest N and older than D. --runs-only prunes only proxy runs'
checkpoints (proxy-ID). Never pruned: a checkpoint a fork stands on, and
the one the vault's origin records (vault create --from, import). The
deletion is one transaction; the vault is then compacted and its garbage
collected, so the chunks only those checkpoints held are freed (vault
info's space says so). Runs whose checkpoint went cannot be undone.
--dry-run lists what would go and changes nothing.

Every proxy run prunes its vault's run checkpoints to the newest
run-checkpoints (default 50; ` + "`avfs vault set NAME run-checkpoints=N`" + `) by itself.`,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			o := vfs.PruneOptions{Keep: -1, DryRun: dryRun, Collect: true}
			if cmd.Flags().Changed("keep") {
				if keep < 0 {
					return nil, invalidf("checkpoint prune", "--keep must be 0 or more, not %d", keep)
				}
				o.Keep = keep
			}
			if olderThan != "" {
				d, err := parseAge(olderThan)
				if err != nil {
					return nil, err
				}
				o.OlderThan = d
			}
			if runsOnly {
				o.Candidate = proxy.IsRunCheckpoint
			}
			_, v, err := a.openVault(argOr(args, 0, ""))
			if err != nil {
				return nil, err
			}
			defer v.Close()
			start := time.Now()
			res, err := v.PruneCheckpoints(o)
			if err != nil {
				return nil, err
			}
			return pruneResult{Vault: v.Name(), DryRun: dryRun, Deleted: res.Deleted, Kept: res.Kept, CompactStats: res.Compact,
				ChunksFreed: res.GC.ChunksFreed, BytesFreed: res.GC.BytesFreed, BytesReclaimed: res.GC.BytesReclaimed,
				DurationMS: ms(time.Since(start))}, nil
		}),
		ValidArgsFunction: a.completeVaults,
	}
	f := c.Flags()
	f.IntVar(&keep, "keep", 0, "keep the newest N checkpoints (of those --runs-only selects)")
	f.StringVar(&olderThan, "older-than", "", "delete only checkpoints older than this: a Go duration (36h) or days (7d, 1d12h)")
	f.BoolVar(&runsOnly, "runs-only", false, "prune only proxy runs' checkpoints")
	f.BoolVar(&dryRun, "dry-run", false, "list what would be deleted; change nothing")
	return c
}

// parseAge reads an age: a Go duration, or a whole number of days ("7d")
// that a Go duration may follow ("1d12h"). It is positive.
func parseAge(s string) (time.Duration, error) {
	bad := invalidf("checkpoint prune", "--older-than wants a duration such as 36h, 7d or 1d12h, not %q", s)
	var days time.Duration
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, bad
		}
		days, rest = time.Duration(n)*24*time.Hour, s[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return 0, bad
		}
	}
	if days+d <= 0 {
		return 0, bad
	}
	return days + d, nil
}
