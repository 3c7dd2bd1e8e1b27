package avfs

import (
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Home is an avfs home directory: the vaults of one user or one agent
// runtime, their mount records and their proxy runs. It is the directory
// the CLI calls $AVFS_HOME; a program and the CLI can share one.
type Home struct {
	reg *registry.Home
	bin string // the avfs program, when given with WithBinary
}

// Option configures a Home.
type Option func(*Home)

// WithBinary names the avfs program that serves mounts (Mount, Exec).
// Without it the program is $AGENTVFS_BIN, else `avfs` on PATH, else the
// running program when it is avfs; when none is found, or the one named
// cannot be run, Mount and Exec fail with BinaryNotFound.
func WithBinary(path string) Option { return func(h *Home) { h.bin = path } }

// DefaultHomeDir is $AVFS_HOME, else ~/.avfs: where the CLI looks.
func DefaultHomeDir() (string, error) { return registry.DefaultDir() }

// OpenHome opens the avfs home at dir, creating it (mode 0700) when
// needed. An empty dir is DefaultHomeDir.
func OpenHome(dir string, opts ...Option) (*Home, error) {
	if dir == "" {
		d, err := registry.DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	reg, err := registry.Open(dir)
	if err != nil {
		return nil, err
	}
	// As in the CLI: while a vault is mounted read-write, its serving
	// process is its only writer, and writes from here get VaultLocked
	// naming the mountpoint.
	reg.WriteGuard = func(vault string) error { return mountd.CheckWriter(reg, vault) }
	// ...and what it reads or freezes beside such a mount holds every write
	// made through the mount, also those its write-back cache still buffers.
	reg.BeforeOpen = func(vault string) error { return mountd.Persist(reg, vault) }
	h := &Home{reg: reg}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Dir is the home's directory.
func (h *Home) Dir() string { return h.reg.Dir }

// Quota limits a vault; zero fields are unlimited.
type Quota = vfs.Quota

// CreateOptions are the settings of a new vault.
type CreateOptions struct {
	// Backend is the storage engine: "sqlite" (the default) or "bolt".
	Backend string
	Quota   Quota
}

// VaultInfo describes a vault of a home.
type VaultInfo = registry.Info

// Create makes a new, empty vault and returns it open. Names are 1–64
// characters of A-Z a-z 0-9 _ -, not starting with -; a name in use is
// VaultExists.
func (h *Home) Create(name string, opts *CreateOptions) (*Vault, error) {
	var o registry.CreateOptions
	if opts != nil {
		o = registry.CreateOptions{Engine: opts.Backend, Quota: opts.Quota}
	}
	return h.wrap(h.reg.Create(name, o))
}

// Open opens vault name (VaultNotFound when there is none). A fork's
// parents are opened with it.
func (h *Home) Open(name string) (*Vault, error) {
	return h.wrap(h.reg.Open(name))
}

// Fork makes dst a fork of vault src and returns it open: a new vault
// that starts as src's working state and then goes its own way. It costs
// O(1) whatever src holds; nothing is copied. src cannot be deleted while
// dst stands on it.
func (h *Home) Fork(src, dst string) (*Vault, error) {
	return h.wrap(h.reg.Fork(src, dst))
}

// Delete removes vault name and its file. A vault that forks stand on is
// refused with VaultHasForks (delete the forks first). Close the vault
// first: an open handle keeps the file's storage alive.
func (h *Home) Delete(name string) error {
	return h.reg.Delete(name)
}

// List describes every vault of the home, sorted by name.
func (h *Home) List() ([]VaultInfo, error) { return h.reg.List() }

// Use makes name the home's current vault: the one the CLI works on when
// no --vault is given.
func (h *Home) Use(name string) error {
	return h.reg.Use(name)
}

// Current is the name of the home's current vault (NoActiveVault when
// none is set).
func (h *Home) Current() (string, error) { return h.reg.Current() }

func (h *Home) wrap(v *vfs.Vault, err error) (*Vault, error) {
	if err != nil {
		return nil, err
	}
	// The registry guards the vaults it opens but not those it creates
	// or forks; every vault of this package gets the guard.
	name := v.Name()
	v.SetWriteGuard(func() error { return h.reg.WriteGuard(name) })
	return &Vault{home: h, v: v}, nil
}

// Vault is an open vault: a filesystem kept in one file, with a working
// state and named checkpoints. Its methods may be called from several
// goroutines. Close it when done.
type Vault struct {
	home *Home
	v    *vfs.Vault
}

// Name is the vault's name.
func (v *Vault) Name() string { return v.v.Name() }

// Close releases the vault (and the parents a fork opened).
func (v *Vault) Close() error { return v.v.Close() }

// Checkpoint is a named, frozen state of a vault.
type Checkpoint = vfs.Checkpoint

// SaveCheckpoint freezes the working state as checkpoint name (a name is
// generated when name is empty) and goes on in a new working state, in
// O(1). Names are 1–128 characters of A-Z a-z 0-9 _ . -, not starting with
// - or .; a name in use is AlreadyExists.
func (v *Vault) SaveCheckpoint(name, message string) (Checkpoint, error) {
	return v.v.SaveCheckpoint(name, message)
}

// RestoreCheckpoint makes checkpoint name the working state again, in
// O(1). Unsaved changes are discarded; every checkpoint stays.
func (v *Vault) RestoreCheckpoint(name string) error {
	return v.v.RestoreCheckpoint(name)
}

// Checkpoints lists the vault's checkpoints, oldest first.
func (v *Vault) Checkpoints() ([]Checkpoint, error) { return v.v.Checkpoints() }

// DeleteCheckpoint forgets checkpoint name (CheckpointNotFound when there
// is none). Its space is reclaimed by `avfs compact`.
func (v *Vault) DeleteCheckpoint(name string) error {
	return v.v.DeleteCheckpoint(name)
}

// Change is one path that differs between two states.
type Change = vfs.Change

// ChangeKind classifies a Change.
type ChangeKind = vfs.ChangeKind

// The kinds of change. Time stamps alone are not a change.
const (
	Added       = vfs.Added
	Modified    = vfs.Modified
	Deleted     = vfs.Deleted
	TypeChanged = vfs.TypeChanged
	ModeChanged = vfs.ModeChanged // permissions or owner only
)

// State names a state of a vault: its working state (Checkpoint "") or
// one of its checkpoints; with After, the state just after that
// checkpoint (for a proxy run's checkpoint: what the run left).
type State struct {
	Vault      *Vault
	Checkpoint string
	After      bool
}

// Diff lists the paths that differ between two states, sorted by path.
// The states may belong to different vaults (a fork and its parent). Only
// the layers that differ are read; file contents are compared by hash,
// never read.
func Diff(from, to State) ([]Change, error) {
	f, err := from.ref()
	if err != nil {
		return nil, err
	}
	t, err := to.ref()
	if err != nil {
		return nil, err
	}
	return vfs.Diff(f, t)
}

func (s State) ref() (vfs.StateRef, error) {
	if s.Checkpoint != "" {
		if _, err := s.Vault.v.GetCheckpoint(s.Checkpoint); err != nil {
			return vfs.StateRef{}, err
		}
	}
	return vfs.StateRef{Vault: s.Vault.v, Checkpoint: s.Checkpoint, After: s.After && s.Checkpoint != ""}, nil
}

// FilePatch is one change in git's patch format.
type FilePatch struct {
	Path string
	// Text is what `git apply` takes; "" when git keeps nothing of the
	// path (a directory, a device, a mode other than the execute bit).
	Text   string
	Binary bool // Text is a git binary patch ("Binary files … differ" over 16 MiB)
	// Insertions and Deletions count the lines changed.
	Insertions, Deletions int
}

// Patch returns the changes between two states as git patches, sorted by
// path: applied with `git apply` to a tree holding from, they make to.
// Only the changed paths are read.
func Patch(from, to State) ([]FilePatch, error) {
	f, err := from.ref()
	if err != nil {
		return nil, err
	}
	t, err := to.ref()
	if err != nil {
		return nil, err
	}
	changes, err := vfs.Diff(f, t)
	if err != nil {
		return nil, err
	}
	ps, err := vfs.Patches(f, t, changes)
	if err != nil {
		return nil, err
	}
	out := make([]FilePatch, len(ps))
	for i, p := range ps {
		out[i] = FilePatch{Path: p.Path, Text: p.Text, Binary: p.Binary, Insertions: p.Insertions, Deletions: p.Deletions}
	}
	return out, nil
}

// Diff lists what changed in this vault from checkpoint from to checkpoint
// to; an empty name is the working state. v.Diff("before", "") is what
// changed since checkpoint "before".
func (v *Vault) Diff(from, to string) ([]Change, error) {
	return Diff(State{Vault: v, Checkpoint: from}, State{Vault: v, Checkpoint: to})
}
