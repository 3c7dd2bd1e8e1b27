package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// VaultArg is the vault argument every vault tool takes.
type VaultArg struct {
	Vault string `json:"vault,omitempty" jsonschema:"the vault to work on (default: the pinned vault, else the home's current vault)"`
}

// VaultList is vault_list's result.
type VaultList struct {
	Vaults []registry.Info `json:"vaults"`
}

func vaultList(s *server, _ context.Context, _ *mcp.CallToolRequest, _ struct{}) (VaultList, error) {
	all, err := s.cfg.Home.List()
	if err != nil {
		return VaultList{}, err
	}
	out := VaultList{Vaults: []registry.Info{}}
	for _, in := range all {
		if s.cfg.Vault == "" || in.Name == s.cfg.Vault {
			out.Vaults = append(out.Vaults, in)
		}
	}
	return out, nil
}

// VaultCreateArgs are vault_create's arguments.
type VaultCreateArgs struct {
	Name    string `json:"name" jsonschema:"the new vault's name"`
	Backend string `json:"backend,omitempty" jsonschema:"the storage engine: sqlite (the default) or bolt"`
	Use     bool   `json:"use,omitempty" jsonschema:"make it the home's current vault"`
}

func vaultCreate(s *server, _ context.Context, _ *mcp.CallToolRequest, in VaultCreateArgs) (registry.Info, error) {
	h := s.cfg.Home
	v, err := h.Create(in.Name, registry.CreateOptions{Engine: in.Backend})
	if err != nil {
		return registry.Info{}, err
	}
	defer v.Close()
	return describe(h, v, in.Use)
}

// VaultForkArgs are vault_fork's arguments.
type VaultForkArgs struct {
	Source string `json:"source" jsonschema:"the vault to fork"`
	Name   string `json:"name" jsonschema:"the fork's name"`
	Use    bool   `json:"use,omitempty" jsonschema:"make the fork the home's current vault"`
}

func vaultFork(s *server, _ context.Context, _ *mcp.CallToolRequest, in VaultForkArgs) (registry.Info, error) {
	h := s.cfg.Home
	v, err := h.Fork(in.Source, in.Name)
	if err != nil {
		return registry.Info{}, err
	}
	defer v.Close()
	return describe(h, v, in.Use)
}

func describe(h *registry.Home, v *vfs.Vault, use bool) (registry.Info, error) {
	if use {
		if err := h.Use(v.Name()); err != nil {
			return registry.Info{}, err
		}
	}
	return h.Describe(v)
}

// withVault opens the call's vault for fn and closes it after.
func (s *server) withVault(arg string, fn func(v *vfs.Vault) error) error {
	name, err := s.vault(arg)
	if err != nil {
		return err
	}
	v, err := s.cfg.Home.Open(name)
	if err != nil {
		return err
	}
	defer v.Close()
	return fn(v)
}

// CheckpointSaveArgs are checkpoint_save's arguments.
type CheckpointSaveArgs struct {
	VaultArg
	Name    string `json:"name,omitempty" jsonschema:"the checkpoint's name, 1-128 characters of A-Z a-z 0-9 _ . - (generated when left out)"`
	Message string `json:"message,omitempty" jsonschema:"a note kept with the checkpoint"`
}

// CheckpointResult is a checkpoint of a vault.
type CheckpointResult struct {
	Vault string `json:"vault"`
	vfs.Checkpoint
}

func checkpointSave(s *server, _ context.Context, _ *mcp.CallToolRequest, in CheckpointSaveArgs) (out CheckpointResult, err error) {
	if in.Name != "" {
		if err := vfs.CheckName("checkpoint", in.Name); err != nil {
			return out, err
		}
	}
	err = s.withVault(in.Vault, func(v *vfs.Vault) error {
		cp, err := v.SaveCheckpoint(in.Name, in.Message)
		out = CheckpointResult{Vault: v.Name(), Checkpoint: cp}
		return err
	})
	return out, err
}

// CheckpointList is checkpoint_list's result.
type CheckpointList struct {
	Vault       string           `json:"vault"`
	Checkpoints []vfs.Checkpoint `json:"checkpoints"`
}

func checkpointList(s *server, _ context.Context, _ *mcp.CallToolRequest, in VaultArg) (out CheckpointList, err error) {
	err = s.withVault(in.Vault, func(v *vfs.Vault) error {
		cps, err := v.Checkpoints()
		out = CheckpointList{Vault: v.Name(), Checkpoints: append([]vfs.Checkpoint{}, cps...)}
		return err
	})
	return out, err
}

// CheckpointRestoreArgs are checkpoint_restore's arguments.
type CheckpointRestoreArgs struct {
	VaultArg
	Name string `json:"name" jsonschema:"the checkpoint to make the working state"`
}

// Restored is checkpoint_restore's result.
type Restored struct {
	Vault string `json:"vault"`
	Name  string `json:"name"`
}

func checkpointRestore(s *server, _ context.Context, _ *mcp.CallToolRequest, in CheckpointRestoreArgs) (out Restored, err error) {
	err = s.withVault(in.Vault, func(v *vfs.Vault) error {
		out = Restored{Vault: v.Name(), Name: in.Name}
		return v.RestoreCheckpoint(in.Name)
	})
	return out, err
}

// DiffArgs are diff's arguments.
type DiffArgs struct {
	VaultArg
	From  string `json:"from,omitempty" jsonschema:"the checkpoint to compare from (default: the vault's latest checkpoint)"`
	To    string `json:"to,omitempty" jsonschema:"the checkpoint to compare to (default: the working state)"`
	Patch bool   `json:"patch,omitempty" jsonschema:"also return the changes as one git-format patch, the text avfs diff --patch prints, which git apply takes on a tree holding from"`
	Stat  bool   `json:"stat,omitempty" jsonschema:"also return git's --stat lines, as avfs diff --stat prints them"`
}

// DiffResult is diff's result: the paths that differ, sorted.
type DiffResult struct {
	Vault   string         `json:"vault"`
	From    string         `json:"from"`
	To      string         `json:"to"` // "" is the working state
	Changes []vfs.Change   `json:"changes"`
	Summary map[string]int `json:"summary"`
	Patch   string         `json:"patch,omitempty"` // with patch: true
	Stat    string         `json:"stat,omitempty"`  // with stat: true
}

func diff(s *server, _ context.Context, _ *mcp.CallToolRequest, in DiffArgs) (out DiffResult, err error) {
	err = s.withVault(in.Vault, func(v *vfs.Vault) error {
		from := in.From
		if from == "" {
			cps, err := v.Checkpoints()
			if err != nil {
				return err
			}
			if len(cps) == 0 {
				return &errs.Error{Kind: errs.CheckpointNotFound, Op: "checkpoint diff", Vault: v.Name(),
					Err:  fmt.Errorf("vault %q has no checkpoint to compare with", v.Name()),
					Hint: "save one with checkpoint_save, or name from"}
			}
			from = cps[len(cps)-1].Name
		}
		for _, cp := range []string{from, in.To} {
			if cp == "" {
				continue
			}
			if err := (vfs.StateRef{Vault: v, Checkpoint: cp}).Check(); err != nil {
				return err
			}
		}
		changes, patches, err := vfs.ContentDiff(vfs.StateRef{Vault: v, Checkpoint: from}, vfs.StateRef{Vault: v, Checkpoint: in.To}, in.Patch || in.Stat)
		if err != nil {
			return err
		}
		out = DiffResult{Vault: v.Name(), From: from, To: in.To, Changes: append([]vfs.Change{}, changes...), Summary: map[string]int{}}
		if in.Patch {
			out.Patch = vfs.PatchText(patches)
		}
		if in.Stat {
			var b strings.Builder
			vfs.WriteStat(&b, patches)
			out.Stat = b.String()
		}
		for _, k := range []vfs.ChangeKind{vfs.Added, vfs.Modified, vfs.Deleted, vfs.Renamed, vfs.TypeChanged, vfs.ModeChanged} {
			out.Summary[string(k)] = 0
		}
		for _, c := range changes {
			out.Summary[string(c.Kind)]++
		}
		return nil
	})
	return out, err
}

// UndoArgs are undo's arguments.
type UndoArgs struct {
	VaultArg
	Run string `json:"run,omitempty" jsonschema:"the id of the exec run to undo (default: the vault's latest run that kept a checkpoint)"`
}

func undo(s *server, ctx context.Context, _ *mcp.CallToolRequest, in UndoArgs) (*proxy.UndoResult, error) {
	vault, rt, err := s.runVault("proxy undo", in.Vault, in.Run)
	if err != nil {
		return nil, err
	}
	return rt.Undo(ctx, vault, in.Run)
}

// RedoArgs are redo's arguments.
type RedoArgs struct {
	VaultArg
	Run string `json:"run,omitempty" jsonschema:"the id of the undone exec run to redo (default: the run the vault's last undo went back before)"`
}

func redo(s *server, ctx context.Context, _ *mcp.CallToolRequest, in RedoArgs) (*proxy.RedoResult, error) {
	vault, rt, err := s.runVault("proxy redo", in.Vault, in.Run)
	if err != nil {
		return nil, err
	}
	return rt.Redo(ctx, vault, in.Run)
}

// runVault is the vault that undo or redo (op) of run works on, and its
// runtime: run's vault when run is given (vault, if given too, must be
// it), else vault or the server's default.
func (s *server) runVault(op, vault, run string) (string, *proxy.Runtime, error) {
	if run != "" {
		store, err := proxy.OpenStore(s.cfg.Home)
		if err != nil {
			return "", nil, err
		}
		e, err := store.Get(run)
		if err != nil {
			return "", nil, err
		}
		if vault != "" && vault != e.Request.Vault {
			return "", nil, errs.New(errs.InvalidInput, op, "run %s is a run of vault %q, not %q", run, e.Request.Vault, vault)
		}
		vault = e.Request.Vault
	}
	vault, err := s.vault(vault)
	if err != nil {
		return "", nil, err
	}
	rt, err := s.cfg.Runtime(vault)
	if err != nil {
		return "", nil, err
	}
	return vault, rt, nil
}
