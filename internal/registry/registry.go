// Package registry keeps the vaults of one avfs home: the directory
// $AVFS_HOME (default ~/.avfs) with a file per vault under vaults/, or a
// store many homes share (a database named by AVFS_STORE: store.go), and
// a pointer to the current vault, which stays per home. It validates
// names, creates vaults atomically, opens forks together with their
// parents, and refuses to delete a vault that other vaults stand on.
package registry

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/atomicfile"
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Ext is the file name extension of vault files.
const Ext = ".avfs"

// CheckName validates a vault name: 1–64 characters of [A-Za-z0-9_-], not
// starting with '-'.
func CheckName(name string) error {
	if !vfs.ValidName(name, 64, "-") {
		return &errs.Error{Kind: errs.InvalidInput, Vault: name, Op: "vault name",
			Err:  fmt.Errorf("invalid vault name %q", name),
			Hint: "use 1-64 characters of A-Z a-z 0-9 _ -, not starting with -"}
	}
	return nil
}

// Home is an avfs home directory.
type Home struct {
	Dir string
	// WriteGuard, when set, is asked before every change of the working
	// state of a vault opened through this Home (see Vault.SetWriteGuard);
	// its error (such as VaultLocked while another process serves the vault
	// read-write) refuses the change. The serving process itself opens its
	// vault through a Home without one.
	WriteGuard func(vault string) error
	// BeforeOpen, when set, is called by Open before it opens a vault; its
	// error fails the open. The CLI has a live mount of the vault persist
	// what it buffers (mountd.Persist), so every command that reads or
	// freezes the working state sees every write made through the mount.
	BeforeOpen func(vault string) error
	// Freed, when set, is told of the layers of a vault file (by vault
	// ID) that compaction or collection deleted, and of a deleted vault
	// (layers nil: all of them), so that what is kept outside the vault
	// per layer (the overlay transport's layer cache) follows it.
	Freed func(vaultID string, layers []uint64)
	// Warnings are what Open noticed about the home that the user should
	// hear of but that does not stop it (a home others can write to).
	Warnings []string
	// Store names the store holding the home's vaults, without its
	// password; empty when they are files under vaults/.
	Store string

	place     place
	storeAddr string        // Store with its password, for child processes
	leaseTTL  time.Duration // of writers' leases; the engine's default when 0
}

// Unguarded is a copy of h without WriteGuard and BeforeOpen, for the
// process that holds a vault's writer lock itself (an overlay workspace
// ingesting its run), whose own writes the guard would refuse. The copy
// keeps h's place: the same files or store.
func (h *Home) Unguarded() *Home {
	c := *h
	c.WriteGuard, c.BeforeOpen = nil, nil
	return &c
}

// guard gives v the Home's WriteGuard for vault name, the writer lease
// of a vault that hosts share, taken before its first change, and the
// Home's Freed.
func (h *Home) guard(name string, v *vfs.Vault) *vfs.Vault {
	if h.Freed != nil {
		id, freed := v.ID(), h.Freed
		v.SetLayersFreed(func(layers []uint64) { freed(id, layers) })
	}
	w := h.leaseFor(name, v)
	switch {
	case h.WriteGuard != nil && w != nil:
		v.SetWriteGuard(func() error {
			if err := h.WriteGuard(name); err != nil {
				return err
			}
			return w.check()
		})
	case h.WriteGuard != nil:
		v.SetWriteGuard(func() error { return h.WriteGuard(name) })
	case w != nil:
		v.SetWriteGuard(w.check)
	}
	return v
}

// DefaultDir is $AVFS_HOME, else ~/.avfs.
func DefaultDir() (string, error) {
	if d := os.Getenv("AVFS_HOME"); d != "" {
		return d, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", &errs.Error{Kind: errs.IoError, Op: "home", Err: err, Hint: "set AVFS_HOME"}
	}
	return filepath.Join(h, ".avfs"), nil
}

// Open opens the home at dir, creating it when it is missing. A home Open
// creates is made 0700, and so is avfs's own vaults/ directory in any home.
// A directory that already exists keeps its mode: it is the user's, maybe
// shared on purpose (as root, AVFS_HOME=/tmp must not take /tmp from
// everyone). Home.Warnings says when others can write to it.
//
// The home's vaults are in the store $AVFS_STORE names, else the one its
// config.toml names, else in files (OpenWith).
func Open(dir string) (*Home, error) {
	ttl, _ := time.ParseDuration(os.Getenv(LeaseTTLEnv))
	return OpenWith(dir, Options{Store: os.Getenv(StoreEnv), LeaseTTL: ttl})
}

// OpenWith is Open with the store given in opts (or none: then the one
// config.toml names, else files). A store's address is checked here, but
// the store is reached only by the first call that needs it.
func OpenWith(dir string, opts Options) (*Home, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "home", Path: dir, Err: err}
	}
	if err := ownDir(abs, false); err != nil {
		return nil, err
	}
	if err := ownDir(filepath.Join(abs, "vaults"), true); err != nil {
		return nil, err
	}
	h := &Home{Dir: abs, leaseTTL: opts.LeaseTTL}
	if h.place, err = placeOf(h, opts); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err == nil && fi.Mode().Perm()&0o002 != 0 {
		h.Warnings = append(h.Warnings, fmt.Sprintf("home %s is writable by others (mode %04o): "+
			"anyone can add or rename files beside your vaults; use a directory only you can write",
			abs, uint32(fi.Mode().Perm())|stickyBit(fi.Mode())))
	}
	return h, nil
}

// ownDir makes directory d 0700 when it creates it; an existing d keeps its
// mode unless it is avfs's own (own), which is set back to 0700.
func ownDir(d string, own bool) error {
	ioErr := func(err error) error { return &errs.Error{Kind: errs.IoError, Op: "home", Path: d, Err: err} }
	if err := os.MkdirAll(filepath.Dir(d), 0o700); err != nil {
		return ioErr(err)
	}
	err := os.Mkdir(d, 0o700)
	switch {
	case err == nil:
		own = true // made exactly 0700, whatever the umask
	case !errors.Is(err, fs.ErrExist):
		return ioErr(err)
	}
	fi, err := os.Stat(d)
	if err != nil {
		return ioErr(err)
	}
	if !fi.IsDir() {
		return &errs.Error{Kind: errs.IoError, Op: "home", Path: d, Errno: syscall.ENOTDIR,
			Err: errors.New("not a directory")}
	}
	if own && fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(d, 0o700); err != nil {
			return ioErr(err)
		}
	}
	return nil
}

func stickyBit(m os.FileMode) uint32 {
	if m&os.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// Env is what a child avfs needs in its environment to open this home as
// this process does: AVFS_HOME, and AVFS_STORE when the vaults are in a
// store (with its password: an environment is not printed, a command
// line is).
func (h *Home) Env() []string {
	env := []string{"AVFS_HOME=" + h.Dir}
	if h.storeAddr != "" {
		env = append(env, StoreEnv+"="+h.storeAddr)
	}
	return env
}

// Path is where vault name is kept: its file, or its table in the store
// (the address without its password, then "#" and the table).
func (h *Home) Path(name string) string { return h.place.where(name) }

// Exists reports whether the home has a vault called name (a file of
// that name, or the name in the store's catalog), without opening it.
func (h *Home) Exists(name string) bool { return CheckName(name) == nil && h.place.exists(name) }

// Caps are the capabilities of the engine holding vault name.
func (h *Home) Caps(name string) (kv.Capabilities, error) { return h.place.caps(name) }

// Names lists the names of the home's vaults, sorted, without opening them.
func (h *Home) Names() ([]string, error) { return h.place.names() }

func (h *Home) exists(name string) bool { return h.Exists(name) }

func notFound(name string) error {
	return &errs.Error{Kind: errs.VaultNotFound, Vault: name, Err: fmt.Errorf("no vault named %q", name),
		Hint: "list vaults with `avfs vault list`"}
}

func vaultExists(name string) error {
	return &errs.Error{Kind: errs.VaultExists, Vault: name, Err: fmt.Errorf("vault %q already exists", name)}
}

// CreateOptions are the settings of a new vault.
type CreateOptions struct {
	Engine string // engines.Default when empty
	Quota  vfs.Quota
}

// Create makes a new, empty vault; in a home with no current vault it
// becomes the current one. The engine's file is created at its
// final name exactly once (so two creators never both win) and the vault
// is initialised in one transaction; a crash in between leaves an empty
// file that Open reports as vfs.ErrIncomplete and the next Create of the
// name replaces.
func (h *Home) Create(name string, opts CreateOptions) (*vfs.Vault, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if opts.Engine == "" {
		opts.Engine = h.place.defaultEngine()
	}
	if have := h.place.engines(); !slices.Contains(have, opts.Engine) {
		return nil, &errs.Error{Kind: errs.InvalidInput, Op: "vault create", Vault: name,
			Err: fmt.Errorf("unknown backend %q (have %s)", opts.Engine, strings.Join(have, ", "))}
	}
	if err := opts.Quota.Check(); err != nil {
		return nil, err
	}
	return h.create(name, opts.Engine, func(eng kv.Engine) (*vfs.Vault, error) {
		return vfs.Create(eng, name, opts.Quota)
	})
}

// create makes the store of vault name and lets fill initialise it.
func (h *Home) create(name, engine string, fill func(kv.Engine) (*vfs.Vault, error)) (*vfs.Vault, error) {
	v, err := h.place.create(name, engine, fill)
	if err != nil {
		return nil, err
	}
	// The first vault of a home with no current vault becomes current, so
	// a newcomer's next command needs no --vault. Two first creators at
	// once may both set it; one of them ends current.
	if _, err := h.Current(); err != nil {
		if err := h.Use(name); err != nil {
			v.Close()
			_ = h.place.remove(name)
			return nil, err
		}
	}
	return h.guard(name, v), nil
}

// removeIncomplete removes vault file name if its creation never finished,
// and reports whether it did.
func (h *Home) removeIncomplete(name string) bool {
	v, err := h.openAlone(name)
	if err == nil {
		v.Close()
		return false
	}
	if !errors.Is(err, vfs.ErrIncomplete) {
		return false
	}
	return h.place.remove(name) == nil
}

// Open opens vault name. A fork's parents are opened with it (without
// BeforeOpen: a fork reads only their frozen layers).
func (h *Home) Open(name string) (*vfs.Vault, error) {
	if h.BeforeOpen != nil {
		if err := CheckName(name); err != nil {
			return nil, err
		}
		if err := h.BeforeOpen(name); err != nil {
			return nil, err
		}
	}
	return h.open(name, "")
}

// OpenFor opens vault name as Open does and, when write is set and hosts
// share its store, takes its writer lease at once rather than at the first
// change: a mount learns that another host writes the vault before it
// serves anything. The lease is given back when the vault is closed.
func (h *Home) OpenFor(name string, write bool) (*vfs.Vault, error) {
	v, err := h.Open(name)
	if err != nil || !write {
		return v, err
	}
	if err := v.CheckWriter(); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

// open opens name and, when wantID is set, checks it is that vault.
func (h *Home) open(name, wantID string) (*vfs.Vault, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if h.WriteGuard != nil {
		// An engine that locks its file to one process (bbolt) could
		// only time out beside a mount's server. Say who holds the
		// vault at once instead.
		if caps, err := h.place.caps(name); err == nil && !caps.SharedOpen {
			if err := h.WriteGuard(name); err != nil {
				return nil, err
			}
		}
	}
	eng, err := h.place.open(name)
	if err != nil {
		return nil, h.openErr(name, err)
	}
	v, err := vfs.Open(eng, h.opener(name))
	if err != nil {
		eng.Close()
		var e *errs.Error
		if errors.As(err, &e) && e.Vault == "" {
			e.Vault = name
		}
		return nil, err
	}
	if wantID != "" && v.ID() != wantID {
		v.Close()
		return nil, &errs.Error{Kind: errs.CorruptVault, Vault: name,
			Err: fmt.Errorf("vault %q was replaced by another vault of the same name", name)}
	}
	return h.guard(name, v), nil
}

// opener opens the parents of fork name.
func (h *Home) opener(name string) vfs.Opener {
	return func(parent, id string) (*vfs.Vault, error) {
		p, err := h.open(parent, id)
		if errs.Is(err, errs.VaultNotFound) {
			return nil, &errs.Error{Kind: errs.CorruptVault, Vault: name, Err: fmt.Errorf("parent vault %q is missing", parent)}
		}
		return p, err
	}
}

func (h *Home) openErr(name string, err error) error {
	var e *errs.Error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notFound(name)
	case errors.As(err, &e):
		return err
	}
	path := h.Path(name)
	hint := ""
	switch {
	case h.Store != "":
		return &errs.Error{Kind: errs.KindOf(wrapEngineErr(err)), Op: "vault open", Vault: name, Path: path, Err: err,
			Hint: storeHint(err)}
	case errors.Is(err, kv.ErrForeign):
		hint = "this file is not an avfs vault"
	}
	return &errs.Error{Kind: errs.KindOf(wrapEngineErr(err)), Op: "vault open", Vault: name, Path: path, Err: err, Hint: hint}
}

func wrapEngineErr(err error) error {
	switch {
	case errors.Is(err, kv.ErrBusy):
		return &errs.Error{Kind: errs.VaultLocked, Err: err}
	case errors.Is(err, kv.ErrUnavailable):
		return &errs.Error{Kind: errs.StoreUnavailable, Err: err}
	case errors.Is(err, kv.ErrNewerFormat):
		return &errs.Error{Kind: errs.UnsupportedFormat, Err: err}
	case errors.Is(err, kv.ErrCorrupt), errors.Is(err, kv.ErrForeign):
		return &errs.Error{Kind: errs.CorruptVault, Err: err}
	}
	return &errs.Error{Kind: errs.StorageError, Err: err}
}

// Fork makes dst a fork of src, in the same engine as src. O(1): the
// fork's file holds only its own layers.
func (h *Home) Fork(src, dst string) (*vfs.Vault, error) {
	if err := CheckName(dst); err != nil {
		return nil, err
	}
	parent, err := h.Open(src)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	return h.create(dst, parent.Engine().Name(), func(eng kv.Engine) (*vfs.Vault, error) {
		return parent.Fork(eng, dst, h.opener(dst))
	})
}

// Info describes a vault.
type Info struct {
	Name          string    `json:"name"`
	ID            string    `json:"vault_id"`
	Backend       string    `json:"backend"`
	Path          string    `json:"path"`
	FormatVersion int       `json:"format_version"`
	CreatedAt     time.Time `json:"created_at"`
	Current       bool      `json:"current"`
	Parent        string    `json:"parent,omitempty"`
}

// Describe returns the Info of an open vault.
func (h *Home) Describe(v *vfs.Vault) (Info, error) {
	hdr := v.Header()
	cur, _ := h.Current()
	info := Info{Name: v.Name(), ID: hdr.VaultID, Backend: v.Engine().Name(), Path: v.Engine().Path(),
		FormatVersion: hdr.FormatVersion, CreatedAt: hdr.CreatedAt, Current: cur == v.Name()}
	parent, _, ok, err := v.Base()
	if err != nil {
		return info, err
	}
	if ok {
		info.Parent = parent
	}
	return info, nil
}

// List describes every vault of the home, sorted by name. Files that are
// not vaults are skipped.
func (h *Home) List() ([]Info, error) {
	names, err := h.place.names()
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, name := range names {
		v, err := h.openAlone(name)
		if err != nil {
			return nil, err
		}
		info, err := h.Describe(v)
		v.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// openAlone opens a vault without its parents, for reading its own records.
func (h *Home) openAlone(name string) (*vfs.Vault, error) {
	eng, err := h.place.open(name)
	if err != nil {
		return nil, h.openErr(name, err)
	}
	v, err := vfs.Open(eng, nil)
	if err != nil {
		eng.Close()
		return nil, err
	}
	return h.guard(name, v), nil
}

// Delete removes vault name. A vault that forks stand on is refused with
// VaultHasForks naming them: delete the forks first. A fork's file goes
// first and its pin in the parent after, so a crash can leave at most a
// stale pin, which Compact clears. A file that is not a readable vault
// can be deleted when no other vault names it as its parent.
func (h *Home) Delete(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if h.WriteGuard != nil {
		// Not from under a mount's server (one that only lingers gives way).
		if err := h.WriteGuard(name); err != nil {
			return err
		}
	}
	var forks []string
	var parent, parentID, selfID string
	var isFork bool
	v, err := h.openAlone(name)
	switch {
	case err == nil:
		selfID = v.ID()
		forks, err = h.liveForks(v)
		if err == nil {
			parent, parentID, isFork, err = v.Base()
		}
		v.Close()
		if err != nil {
			return err
		}
	case errs.Is(err, errs.CorruptVault) || errs.Is(err, errs.UnsupportedFormat):
		// Its pins cannot be read: ask the other vaults instead.
		if forks, err = h.childrenOf(name); err != nil {
			return err
		}
	default:
		return err
	}
	if len(forks) > 0 {
		return &errs.Error{Kind: errs.VaultHasForks, Op: "vault delete", Vault: name,
			Err:   fmt.Errorf("vault %q has forks: %s", name, strings.Join(forks, ", ")),
			Hint:  "delete the forks first",
			Extra: map[string]any{"forks": forks}}
	}
	if err := h.place.remove(name); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "vault delete", Vault: name, Err: err}
	}
	if cur, _ := h.Current(); cur == name {
		_ = os.Remove(filepath.Join(h.Dir, "current"))
	}
	if h.Freed != nil && selfID != "" {
		h.Freed(selfID, nil)
	}
	if isFork {
		if p, err := h.openAlone(parent); err == nil {
			if p.ID() == parentID {
				_ = p.Unpin(name, selfID)
			}
			p.Close()
		}
	}
	return nil
}

// childrenOf returns the vaults whose fork base names vault name.
func (h *Home) childrenOf(name string) ([]string, error) {
	names, err := h.place.names()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, other := range names {
		if other == name {
			continue
		}
		v, err := h.openAlone(other)
		if err != nil {
			continue
		}
		parent, _, isFork, err := v.Base()
		v.Close()
		if err == nil && isFork && parent == name {
			out = append(out, other)
		}
	}
	return out, nil
}

// liveForks returns the names of v's forks whose files exist, and removes
// pins whose fork is gone.
func (h *Home) liveForks(v *vfs.Vault) ([]string, error) {
	pins, err := v.Forks()
	if err != nil {
		return nil, err
	}
	var live []string
	for _, p := range pins {
		f, err := h.openAlone(p.Name)
		switch {
		case err == nil && f.ID() == p.VaultID:
			live = append(live, p.Name)
		case err == nil, errs.Is(err, errs.VaultNotFound), errors.Is(err, vfs.ErrIncomplete):
			_ = v.Unpin(p.Name, p.VaultID) // the fork is gone, or the name holds another vault
		default:
			live = append(live, p.Name) // present but unreadable: keep it safe
		}
		if f != nil {
			f.Close()
		}
	}
	return live, nil
}

// Compact clears stale fork pins, then compacts and garbage-collects vault name.
func (h *Home) Compact(name string) (vfs.CompactStats, vfs.GCStats, error) {
	v, err := h.Open(name)
	if err != nil {
		return vfs.CompactStats{}, vfs.GCStats{}, err
	}
	defer v.Close()
	if _, err := h.liveForks(v); err != nil {
		return vfs.CompactStats{}, vfs.GCStats{}, err
	}
	cs, err := v.Compact()
	if err != nil {
		return cs, vfs.GCStats{}, err
	}
	st, err := h.GC(v)
	gs := st.GCStats
	if err != nil {
		return cs, gs, err
	}
	// GC gave back what the engine can give a piece at a time; a file that
	// still has free room (bbolt, SQLite made before incremental vacuum)
	// is rewritten.
	sp, err := v.Space()
	if err != nil || sp.FreeBytes == 0 {
		return cs, gs, err
	}
	n, err := v.Rewrite()
	gs.BytesReclaimed += n
	return cs, gs, err
}

// Use makes name the current vault.
func (h *Home) Use(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if !h.exists(name) {
		return notFound(name)
	}
	if err := atomicfile.Write(filepath.Join(h.Dir, "current"), []byte(name+"\n"), 0o600); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "vault use", Err: err}
	}
	return nil
}

// Current returns the current vault's name, or NoActiveVault.
func (h *Home) Current() (string, error) {
	b, err := readSmall(filepath.Join(h.Dir, "current"))
	name := strings.TrimSpace(string(b))
	if err != nil || name == "" || CheckName(name) != nil {
		return "", &errs.Error{Kind: errs.NoActiveVault, Err: errors.New("no current vault"),
			Hint: "pass --vault NAME, set AVFS_VAULT, or run `avfs vault use NAME`"}
	}
	return name, nil
}

// readSmall reads a small file of the home (the current vault's name)
// without blocking on a FIFO put at its name, and only when it is a
// regular file.
func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return io.ReadAll(io.LimitReader(f, 4096))
}
