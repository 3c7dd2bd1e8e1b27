package cli

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// JSONContractVersion is the version of the JSON contract
// (docs/json-contract.md). Fields may be added without a change; a
// rename or removal would need a new version.
const JSONContractVersion = 1

// version is the release, set at link time with
// -ldflags "-X github.com/agentvfs/agentvfs/internal/cli.version=v1.2.3".
var version = ""

type fsckResult struct {
	Vault string `json:"vault"`
	OK    bool   `json:"ok"`
	*vfs.FsckReport
	DurationMS float64 `json:"duration_ms"`
	// PendingRuns are overlay runs whose process died before their
	// ingest: not a fault of the vault file, so ok stays true.
	PendingRuns []pendingRun `json:"pending_runs"`
}

// pendingRun is one overlay run fsck found waiting for its ingest.
type pendingRun struct {
	Dir    string `json:"dir"`
	Action string `json:"action"`
}

func (r fsckResult) human(w io.Writer) {
	fmt.Fprintf(w, "%s: ok (%d layers, %d checkpoints, %d states, %d inodes, %d chunks checked)\n",
		r.Vault, r.Layers, r.Checkpoints, r.States, r.Inodes, r.Chunks)
	for _, p := range r.PendingRuns {
		fmt.Fprintf(w, "pending overlay run %s: %s\n", p.Dir, p.Action)
	}
}

// pendingRuns lists the overlay runs of v that a crash left un-ingested.
func (a *app) pendingRuns(h *registry.Home, v *vfs.Vault) []pendingRun {
	out := []pendingRun{}
	runDir, ok := proxy.FoundRuntimeDir(h.Dir, a.env.Getenv("XDG_RUNTIME_DIR"))
	if !ok {
		return out
	}
	for _, d := range overlaymount.Waiting(h, v.Name(), v.ID(), overlaymount.CacheDir(runDir)) {
		out = append(out, pendingRun{Dir: d, Action: "the next avfs command that opens the vault ingests it whole " +
			"(avfs vault info " + v.Name() + "); remove the directory to throw the run's writes away"})
	}
	return out
}

func (a *app) fsckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "fsck [NAME]",
		Short: "Check a vault's consistency (default: the selected vault)",
		Long: `Check every invariant of vault NAME: its layers, checkpoints, journal, chunk
hashes, and the tree of the working state and of every checkpoint. Nothing
is changed. Problems are reported as CorruptVault (exit code 8) with the
list in "problems". An overlay run whose process died before its writes
were ingested is listed in "pending_runs" with what to do; any other
command that opens the vault ingests it.`,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			a.keepRuns = true
			h, v, err := a.openVault(argOr(args, 0, ""))
			if err != nil {
				return nil, err
			}
			defer v.Close()
			start := time.Now()
			rep, err := v.Fsck()
			if err != nil {
				return nil, err
			}
			r := fsckResult{Vault: v.Name(), OK: rep.OK(), FsckReport: rep, DurationMS: ms(time.Since(start)),
				PendingRuns: a.pendingRuns(h, v)}
			if !r.OK {
				return nil, &errs.Error{Kind: errs.CorruptVault, Op: "fsck", Vault: v.Name(),
					Err:   fmt.Errorf("%d problems found, the first: %s", len(rep.Problems), rep.Problems[0]),
					Extra: map[string]any{"problems": rep.Problems, "report": r}}
			}
			return r, nil
		}),
		ValidArgsFunction: a.completeVaults,
	}
}

// collectAfterWrite runs the vault's automatic garbage collection after a
// command changed it (vfs.Vault.AutoGC: a look at the file's space until
// enough room went into use). The command's change is made by then; a
// collection that fails frees nothing, changes nothing else, and is tried
// again after the next write, so its error does not fail the command.
func collectAfterWrite(v *vfs.Vault) {
	_, _, _ = v.AutoGC()
}

type gcResult struct {
	Vault string `json:"vault"`
	registry.GCStats
	DurationMS float64 `json:"duration_ms"`
}

func (r gcResult) human(w io.Writer) {
	fmt.Fprintf(w, "%s: freed %d chunks (%s), kept %d; file %s smaller", r.Vault, r.ChunksFreed,
		sizeString(r.BytesFreed), r.ChunksKept, sizeString(r.BytesReclaimed))
	if r.UnnamedSwept > 0 {
		fmt.Fprintf(w, "; swept %d unnamed vaults of the store (left by killed creates or deletes)", r.UnnamedSwept)
	}
	fmt.Fprintln(w)
}

func (a *app) gcCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Free file data that nothing in the selected vault reaches",
		Long: `Drop the layers no state of the selected vault reaches (working states a
restore abandoned), free the file data no layer maps, then give the freed
room back to the host where the engine can do it a piece at a time
(SQLite). Writes go on beside it: it sweeps a few hundred chunks per
transaction. Commands that write, and mounts, run it on their own once
enough room went into use since the last run; avfs gc runs it now.

The vaults of a store share one chunk space: there gc frees the data that
no vault of the store maps, and frees nothing if one cannot be read. It
first drops the vaults no name points to that were made over an hour ago
(left by a vault create or delete that was killed midway), and says how
many (unnamed_swept).`,
		Args: exactArgs(0),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(h *registry.Home, v *vfs.Vault) (any, error) {
				start := time.Now()
				st, err := h.GC(v)
				return gcResult{Vault: v.Name(), GCStats: st, DurationMS: ms(time.Since(start))}, err
			})
		}),
	}
}

type compactResult struct {
	Vault string `json:"vault"`
	vfs.CompactStats
	vfs.GCStats
	FileSizeBefore int64   `json:"file_size_before"`
	FileSizeAfter  int64   `json:"file_size_after"`
	DurationMS     float64 `json:"duration_ms"`
}

func (r compactResult) human(w io.Writer) {
	fmt.Fprintf(w, "%s: dropped %d layers, merged %d, freed %d chunks (%s); file %s -> %s\n", r.Vault,
		r.CompactStats.LayersDropped+r.GCStats.LayersDropped, r.LayersMerged, r.ChunksFreed, sizeString(r.BytesFreed),
		sizeString(r.FileSizeBefore), sizeString(r.FileSizeAfter))
}

func (a *app) compactCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Merge and drop layers nothing names, then free unreachable data",
		Long: `Compact the selected vault: drop the layers no state reaches (abandoned by
restores, or held only by deleted checkpoints), merge frozen layers nothing
names so chains stay short, clear pins of forks that are gone, then
garbage-collect file data and give the freed room back to the host: a
file that cannot give it back a piece at a time (bbolt, or SQLite made
before incremental vacuum, which this migrates) is rewritten into a new
one. States and checkpoints are unchanged.`,
		Args: exactArgs(0),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			name, err := a.vaultName(h)
			if err != nil {
				return nil, err
			}
			r := compactResult{Vault: name, FileSizeBefore: fileSize(h.Path(name))}
			start := time.Now()
			r.CompactStats, r.GCStats, err = h.Compact(name)
			if err != nil {
				return nil, err
			}
			r.DurationMS = ms(time.Since(start))
			r.FileSizeAfter = fileSize(h.Path(name))
			return r, nil
		}),
	}
}

type versionResult struct {
	Version        string   `json:"version"`
	GoVersion      string   `json:"go_version"`
	OS             string   `json:"os"`
	Arch           string   `json:"arch"`
	FormatVersion  int      `json:"format_version"`
	JSONContract   int      `json:"json_contract_version"`
	Backends       []string `json:"backends"`
	DefaultBackend string   `json:"default_backend"`
}

func (r versionResult) human(w io.Writer) {
	fmt.Fprintf(w, "avfs %s (%s %s/%s), vault format %d, backends %v\n", r.Version, r.GoVersion, r.OS, r.Arch,
		r.FormatVersion, r.Backends)
}

// Version is this build's version: the link-time version, else the
// module version, else "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of avfs and what it supports",
		Args:  exactArgs(0),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return versionResult{Version: Version(), GoVersion: runtime.Version(), OS: runtime.GOOS,
				Arch: runtime.GOARCH, FormatVersion: vfs.FormatVersion, JSONContract: JSONContractVersion,
				Backends: engines.Names(), DefaultBackend: engines.Default}, nil
		}),
	}
}

type completionResult struct {
	Shell  string `json:"shell"`
	Script string `json:"script"`
}

func (a *app) completionCmd() *cobra.Command {
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:   "completion SHELL",
		Short: "Print the shell completion script for bash, zsh, fish or powershell",
		Long: `Print the completion script for SHELL. For bash:
  source <(avfs completion bash)
for zsh:
  avfs completion zsh > "${fpath[1]}/_avfs"
With --json the script is the "script" field of one document.`,
		Args:      exactArgs(1),
		ValidArgs: shells,
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			var buf bytes.Buffer
			root := cmd.Root()
			var err error
			switch args[0] {
			case "bash":
				err = root.GenBashCompletionV2(&buf, true)
			case "zsh":
				err = root.GenZshCompletion(&buf)
			case "fish":
				err = root.GenFishCompletion(&buf, true)
			case "powershell":
				err = root.GenPowerShellCompletionWithDesc(&buf)
			default:
				return nil, invalidf("completion", "unknown shell %q (have bash, zsh, fish, powershell)", args[0])
			}
			if err != nil {
				return nil, &errs.Error{Kind: errs.IoError, Op: "completion", Err: err}
			}
			if !a.jsonOut {
				_, err := a.env.Stdout.Write(buf.Bytes())
				return nil, err
			}
			return completionResult{Shell: args[0], Script: buf.String()}, nil
		}),
	}
}
