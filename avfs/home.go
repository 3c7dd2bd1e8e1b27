package avfs

import (
	"context"
	"os"
	"time"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
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
func DefaultHomeDir() (string, error) {
	d, err := registry.DefaultDir()
	return d, wrapErr(err)
}

// OpenHome opens the avfs home at dir, creating it (mode 0700) when
// needed. An empty dir is DefaultHomeDir.
func OpenHome(dir string, opts ...Option) (*Home, error) {
	if dir == "" {
		d, err := registry.DefaultDir()
		if err != nil {
			return nil, wrapErr(err)
		}
		dir = d
	}
	reg, err := registry.Open(dir)
	if err != nil {
		return nil, wrapErr(err)
	}
	// As in the CLI: while a vault is mounted read-write, its serving
	// process is its only writer, and writes from here get VaultLocked
	// naming the mountpoint.
	reg.WriteGuard = func(vault string) error { return mountd.CheckWriter(reg, vault) }
	// ...and what it reads or freezes beside such a mount holds every write
	// made through the mount, also those its write-back cache still buffers.
	reg.BeforeOpen = func(vault string) error { return mountd.Persist(reg, vault) }
	// ...and the overlay runs' layer cache follows the vaults, a run a
	// crash left ingested before anything else opens its vault.
	overlaymount.Follow(reg, func() (string, bool) {
		runDir, ok := proxy.FoundRuntimeDir(reg.Dir, os.Getenv("XDG_RUNTIME_DIR"))
		return overlaymount.CacheDir(runDir), ok
	}, nil, nil)
	h := &Home{reg: reg}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Dir is the home's directory.
func (h *Home) Dir() string { return h.reg.Dir }

// Quota limits a vault; zero fields are unlimited.
type Quota struct {
	MaxSizeMB     int64 // the vault's total file content, in MiB
	MaxFiles      int64 // the number of files, directories and links
	MaxFileSizeMB int64 // the size of one file, in MiB
}

func (q Quota) internal() vfs.Quota {
	return vfs.Quota{MaxSizeMB: q.MaxSizeMB, MaxFiles: q.MaxFiles, MaxFileSizeMB: q.MaxFileSizeMB}
}

// CreateOptions are the settings of a new vault.
type CreateOptions struct {
	// Backend is the storage engine: "sqlite" (the default) or "bolt".
	Backend string
	Quota   Quota
}

// VaultInfo describes a vault of a home.
type VaultInfo struct {
	Name          string
	ID            string    // a random id given at creation, kept by forks' records
	Backend       string    // the storage engine: "sqlite", "bolt", ...
	Path          string    // the vault's database file (or address)
	FormatVersion int       // the on-disk format it was written in
	CreatedAt     time.Time // UTC
	Current       bool      // it is the home's current vault
	Parent        string    // the vault it is a fork of; "" for none
}

func vaultInfo(i registry.Info) VaultInfo {
	return VaultInfo{Name: i.Name, ID: i.ID, Backend: i.Backend, Path: i.Path, FormatVersion: i.FormatVersion,
		CreatedAt: i.CreatedAt, Current: i.Current, Parent: i.Parent}
}

// Create makes a new, empty vault and returns it open. Names are 1–64
// characters of A-Z a-z 0-9 _ -, not starting with -; a name in use is
// VaultExists.
func (h *Home) Create(ctx context.Context, name string, opts *CreateOptions) (*Vault, error) {
	if err := stopped(ctx, "vault create"); err != nil {
		return nil, err
	}
	var o registry.CreateOptions
	if opts != nil {
		o = registry.CreateOptions{Engine: opts.Backend, Quota: opts.Quota.internal()}
	}
	return h.wrap(h.reg.Create(name, o))
}

// Open opens vault name (VaultNotFound when there is none). A fork's
// parents are opened with it.
func (h *Home) Open(ctx context.Context, name string) (*Vault, error) {
	if err := stopped(ctx, "vault open"); err != nil {
		return nil, err
	}
	return h.wrap(h.reg.Open(name))
}

// Fork makes dst a fork of vault src and returns it open: a new vault
// that starts as src's working state and then goes its own way. It costs
// O(1) whatever src holds; nothing is copied. src cannot be deleted while
// dst stands on it.
func (h *Home) Fork(ctx context.Context, src, dst string) (*Vault, error) {
	if err := stopped(ctx, "vault fork"); err != nil {
		return nil, err
	}
	return h.wrap(h.reg.Fork(src, dst))
}

// Delete removes vault name and its file. A vault that forks stand on is
// refused with VaultHasForks (delete the forks first). Close the vault
// first: an open handle keeps the file's storage alive.
func (h *Home) Delete(ctx context.Context, name string) error {
	if err := stopped(ctx, "vault delete"); err != nil {
		return err
	}
	return wrapErr(h.reg.Delete(name))
}

// List describes every vault of the home, sorted by name.
func (h *Home) List(ctx context.Context) ([]VaultInfo, error) {
	if err := stopped(ctx, "vault list"); err != nil {
		return nil, err
	}
	infos, err := h.reg.List()
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]VaultInfo, len(infos))
	for i, in := range infos {
		out[i] = vaultInfo(in)
	}
	return out, nil
}

// Use makes name the home's current vault: the one the CLI works on when
// no --vault is given.
func (h *Home) Use(name string) error { return wrapErr(h.reg.Use(name)) }

// Current is the name of the home's current vault (NoActiveVault when
// none is set).
func (h *Home) Current() (string, error) {
	name, err := h.reg.Current()
	return name, wrapErr(err)
}

func (h *Home) wrap(v *vfs.Vault, err error) (*Vault, error) {
	if err != nil {
		return nil, wrapErr(err)
	}
	// The registry guards the vaults it opens but not those it creates
	// or forks; every vault of this package gets the guard.
	name := v.Name()
	v.SetWriteGuard(func() error { return h.reg.WriteGuard(name) })
	return &Vault{home: h, v: v}, nil
}
