package proxy

import (
	"encoding/json"
	"errors"

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
}

type summary struct {
	Changes []Change `json:"changes"`
	Renames bool     `json:"renames"`
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
			// nothing to make durable (its checkpoint equals the state).
			if len(s.Changes) == 0 {
				return s, nil
			}
			return s, v.Sync()
		},
	}
}

// summarizeIn takes a run's summary in v.
func summarizeIn(v *vfs.Vault, a summarizeArgs) (summary, error) {
	changes, renames, err := summarize(v, a.Checkpoint)
	if err != nil {
		return summary{}, err
	}
	if a.Delete {
		if err := v.DeleteCheckpoint(a.Checkpoint); err != nil {
			return summary{}, err
		}
	} else if err := v.Seal(); err != nil { // run:ID^after is exactly what the run left
		return summary{}, err
	}
	return summary{Changes: changes, Renames: renames}, nil
}

// liveMount is the live read-write mount of vault, or "": its server is
// alive and its directory is still an avfs mount (a server whose mount
// was detached lives on until its last file closes; a command run in
// its directory would run on the host's).
func (rt *Runtime) liveMount(vault string) string {
	mnt, live := mountrec.Writer(rt.Home, vault)
	if live && mnt != "" && mountrec.IsAvfsMount(mnt) {
		return mnt
	}
	return ""
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
