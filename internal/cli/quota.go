package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// quotaKeys are the keys of quota set and clear, as in the JSON.
var quotaKeys = []string{"max_size_mb", "max_files", "max_file_size_mb"}

type quotaResult struct {
	Vault string    `json:"vault"`
	Quota vfs.Quota `json:"quota"`
	Usage vfs.Usage `json:"usage"`
}

func (r quotaResult) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	limit := func(n int64, unit string) string {
		if n == 0 {
			return "unlimited"
		}
		return fmt.Sprintf("%d%s", n, unit)
	}
	fmt.Fprintf(tw, "vault\t%s\n", r.Vault)
	fmt.Fprintf(tw, "max_size_mb\t%s\t(using %s)\n", limit(r.Quota.MaxSizeMB, " MiB"), sizeString(r.Usage.Bytes))
	fmt.Fprintf(tw, "max_files\t%s\t(using %d)\n", limit(r.Quota.MaxFiles, ""), r.Usage.Files)
	fmt.Fprintf(tw, "max_file_size_mb\t%s\n", limit(r.Quota.MaxFileSizeMB, " MiB"))
	tw.Flush()
}

func quotaString(q vfs.Quota) string {
	var parts []string
	for _, kv := range []struct {
		k string
		v int64
	}{{"max_size_mb", q.MaxSizeMB}, {"max_files", q.MaxFiles}, {"max_file_size_mb", q.MaxFileSizeMB}} {
		if kv.v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", kv.k, kv.v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func (a *app) quotaCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "quota",
		Short: "Show, set and clear the quotas of the selected vault",
		Long: `Show the quotas of the selected vault with its usage. Quotas are enforced on
every write path, the mount included, as QuotaExceeded. Keys:
  max_size_mb       total size of file data and of extended attributes'
                    names and values, in MiB
  max_files         number of files, directories and links
  max_file_size_mb  size of one file, in MiB
0 means unlimited. A refused write changes nothing. A limit may be set
below the current usage: further growth then fails, shrinking still works.`,
		Args: noArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.changeQuota(nil)
		}),
	}
	c.AddCommand(&cobra.Command{
		Use:       "set KEY VALUE",
		Short:     "Set one quota (VALUE 0 or unlimited: no limit)",
		Args:      exactArgs(2),
		ValidArgs: quotaKeys,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			set, err := quotaSetter(args[0])
			if err != nil {
				return nil, err
			}
			n, err := quotaValue(args[1])
			if err != nil {
				return nil, err
			}
			return a.changeQuota(func(q *vfs.Quota) { *set(q) = n })
		}),
	}, &cobra.Command{
		Use:       "clear KEY",
		Short:     "Remove one quota (KEY all: every quota)",
		Args:      exactArgs(1),
		ValidArgs: append(quotaKeys, "all"),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if args[0] == "all" {
				return a.changeQuota(func(q *vfs.Quota) { *q = vfs.Quota{} })
			}
			set, err := quotaSetter(args[0])
			if err != nil {
				return nil, err
			}
			return a.changeQuota(func(q *vfs.Quota) { *set(q) = 0 })
		}),
	})
	return c
}

// quotaSetter returns the field of a quota that KEY names; max-files is
// accepted for max_files.
func quotaSetter(key string) (func(*vfs.Quota) *int64, error) {
	switch strings.ReplaceAll(key, "-", "_") {
	case "max_size_mb":
		return func(q *vfs.Quota) *int64 { return &q.MaxSizeMB }, nil
	case "max_files":
		return func(q *vfs.Quota) *int64 { return &q.MaxFiles }, nil
	case "max_file_size_mb":
		return func(q *vfs.Quota) *int64 { return &q.MaxFileSizeMB }, nil
	}
	return nil, invalidf("quota", "unknown quota key %q (have %s)", key, strings.Join(quotaKeys, ", "))
}

func quotaValue(s string) (int64, error) {
	if s == "unlimited" || s == "none" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, invalidf("quota", "invalid quota value %q: use a whole number >= 0 (0: unlimited)", s)
	}
	return n, nil
}

// changeQuota applies change (nil: none) to the selected vault's quota
// and reports the result.
func (a *app) changeQuota(change func(*vfs.Quota)) (any, error) {
	return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
		r := quotaResult{Vault: v.Name()}
		run := v.View
		if change != nil {
			run = v.Update
		}
		err := run(func(tx *vfs.Tx) (err error) {
			if r.Quota, err = tx.Quota(); err != nil {
				return err
			}
			if change != nil {
				change(&r.Quota)
				if err := tx.SetQuota(r.Quota); err != nil {
					return err
				}
			}
			r.Usage, err = tx.Usage()
			return err
		})
		return r, err
	})
}
