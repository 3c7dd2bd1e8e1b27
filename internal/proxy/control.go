package proxy

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// A run on a vault that is mounted read-write asks the mount's server for
// its checkpoint and its change summary (mountd.Call): the server holds the
// vault open with every write made through the mount, so neither step
// opens the vault again nor waits for an fsync. Runs fall back to opening
// the vault when the mount has no control socket.
const (
	opCheckpoint = "proxy.checkpoint"
	opSummarize  = "proxy.summarize"
	opReadlink   = "proxy.readlink" // the classifier's question (links.go)
)

type checkpointArgs struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

type summarizeArgs struct {
	Checkpoint string `json:"checkpoint"`
	// Delete forgets the checkpoint once the summary is taken
	// (--checkpoint never).
	Delete bool `json:"delete"`
	// Changes is --changes ("" is full) and Limit the most changes to
	// send back (ChangesLimit when 0).
	Changes string `json:"changes"`
	Limit   int    `json:"limit"`
}

type summary struct {
	Changes []Change `json:"changes"`
	Renames bool     `json:"renames"`
	// Total counts the changes before the list was cut, Summary sums
	// them (nil: not taken, --changes none, or a server that does not
	// cut), Truncated says the list was cut at the limit.
	Total     int      `json:"total"`
	Summary   *Summary `json:"summary"`
	Truncated bool     `json:"truncated"`
}

// ServerOps are the ops a mount's server answers for proxy runs; the CLI
// gives them to every read-write mount it serves (mountd.Options.Control).
func ServerOps() map[string]mountd.ControlFunc {
	return map[string]mountd.ControlFunc{
		opCheckpoint: func(v *vfs.Vault, raw json.RawMessage) (any, error) {
			var a checkpointArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, err
			}
			_, err := v.SaveCheckpoint(a.Name, a.Message)
			return nil, err
		},
		opReadlink: func(v *vfs.Vault, raw json.RawMessage) (any, error) {
			var a readlinkArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, err
			}
			return readlinkIn(v, a.Path)
		},
		opSummarize: func(v *vfs.Vault, raw json.RawMessage) (any, error) {
			var a summarizeArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, err
			}
			s, err := summarizeIn(v, a)
			if err != nil {
				return nil, err
			}
			// The envelope reports the run's changes: make them durable
			// before it is written. A run that changed nothing has
			// nothing to make durable (its checkpoint equals the state);
			// one whose changes were not listed (--changes none) may have.
			if s.Total == 0 && a.Changes != ChangesNone {
				return s, nil
			}
			return s, v.Sync()
		},
	}
}

// summarizeIn takes a run's summary in v, shaped as a.Changes asks, and
// seals the run's layer (or forgets its checkpoint). --changes none takes
// no diff.
func summarizeIn(v *vfs.Vault, a summarizeArgs) (summary, error) {
	var s summary
	if a.Changes != ChangesNone {
		var err error
		if s.Changes, s.Renames, err = summarize(v, a.Checkpoint); err != nil {
			return summary{}, err
		}
		s.shape(a.Changes, a.limit())
	}
	if a.Delete {
		if err := v.DeleteCheckpoint(a.Checkpoint); err != nil {
			return summary{}, err
		}
	} else if err := v.Seal(); err != nil { // run:ID^after is exactly what the run left
		return summary{}, err
	} else if err := retainRuns(v); err != nil {
		return summary{}, err
	}
	return s, nil
}

// IsRunCheckpoint reports whether cp is a proxy run's checkpoint
// (CheckpointName): what run retention and `checkpoint prune --runs-only`
// prune.
func IsRunCheckpoint(cp vfs.Checkpoint) bool { return strings.HasPrefix(cp.Name, CheckpointName("")) }

// retainRuns prunes the vault's oldest run checkpoints beyond its
// run_checkpoints setting (vfs.Settings), after a run added one. What only
// they held is compacted away here and freed by the vault's automatic
// collection.
func retainRuns(v *vfs.Vault) error {
	s, err := v.Settings()
	if err != nil || s.RunCheckpoints == 0 {
		return err
	}
	cps, err := v.Checkpoints()
	if err != nil {
		return err
	}
	if n := len(slices.DeleteFunc(cps, func(cp vfs.Checkpoint) bool { return !IsRunCheckpoint(cp) })); n <= s.RunCheckpoints {
		return nil
	}
	if _, err := v.PruneCheckpoints(vfs.PruneOptions{Keep: s.RunCheckpoints, Candidate: IsRunCheckpoint}); err != nil {
		return err
	}
	_, _, _ = v.AutoGC() // as after any write (cli.collectAfterWrite): a failed collection is tried again later
	return nil
}

func (a summarizeArgs) limit() int {
	if a.Limit > 0 {
		return a.Limit
	}
	return ChangesLimit
}

// liveMount is the live read-write mount of vault, or "": its server is
// alive and its directory is still an avfs mount (a server whose mount
// was detached lives on until its last file closes; a command run in
// its directory would run on the host's).
func (rt *Runtime) liveMount(vault string) string {
	mnt, live := mountrec.Writer(rt.Home, vault)
	if !live || mnt == "" {
		return ""
	}
	in, ok := mountrec.Find(rt.Home, mnt)
	if !ok {
		in = mountrec.Info{Mountpoint: mnt, Transport: mountrec.FUSE}
	}
	if servesDir(in) {
		return mnt
	}
	return ""
}

// servesDir reports whether the mount of record in is still in its
// directory: an avfs FUSE mount, or an overlay (whose server ingests at
// its end).
func servesDir(in mountrec.Info) bool {
	if in.Transport == transportOverlay {
		return mountrec.IsMountpoint(in.Mountpoint)
	}
	return mountrec.IsAvfsMount(in.Mountpoint)
}

// inVault runs a control op in the server of mnt when there is one, and
// fn on the vault opened here otherwise (after asking any mount of the
// vault to persist what it buffers).
func (rt *Runtime) inVault(vault, mnt, op string, args, result any, fn func(*vfs.Vault) error) error {
	if mnt != "" {
		err := mountd.Call(rt.Home, mnt, op, args, result)
		if !errors.Is(err, mountd.ErrNoControl) {
			return err
		}
	}
	if err := mountd.Persist(rt.Home, vault); err != nil {
		return err
	}
	return rt.withVault(vault, fn)
}
