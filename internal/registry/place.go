package registry

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// place is where a home keeps the stores of its vaults: a file per vault
// under $AVFS_HOME/vaults (files), or a table per vault in a database that
// many homes share (store). Everything else in a home (the current vault,
// mounts, policies) stays in its directory.
type place interface {
	// create makes the store of new vault name with the named engine and
	// has fill initialise it. It fails with VaultExists when the name is
	// taken; a vault whose fill failed is removed.
	create(name, engine string, fill func(kv.Engine) (*vfs.Vault, error)) (*vfs.Vault, error)
	// open opens the store of vault name; its error wraps fs.ErrNotExist
	// when there is no such vault, else it is the engine's.
	open(name string) (kv.Engine, error)
	// exists reports whether the place holds vault name, without opening it.
	exists(name string) bool
	// remove removes the store of vault name; a missing one is not an error.
	remove(name string) error
	// names lists the vault names the place holds, sorted.
	names() ([]string, error)
	// where names vault name's store for output and messages: a file's
	// path, or the store's address without its password and the table.
	where(name string) string
	// caps are the capabilities of vault name's engine.
	caps(name string) (kv.Capabilities, error)
	// defaultEngine is the engine new vaults get.
	defaultEngine() string
	// engines are the engines a new vault may be created with.
	engines() []string
}

// files is the place of a home without a store: $AVFS_HOME/vaults/NAME.avfs.
type files struct {
	home *Home
	dir  string
}

func (f *files) path(name string) string { return filepath.Join(f.dir, name+Ext) }

func (f *files) where(name string) string { return f.path(name) }

func (f *files) defaultEngine() string { return engines.Default }

func (f *files) engines() []string { return engines.Names() }

func (f *files) caps(name string) (kv.Capabilities, error) { return engines.CapsOf(f.path(name)) }

func (f *files) open(name string) (kv.Engine, error) { return engines.Open(f.path(name)) }

func (f *files) exists(name string) bool {
	_, err := os.Stat(f.path(name))
	return err == nil
}

func (f *files) remove(name string) error { return engines.Remove(f.path(name)) }

// create creates the file at its final name exactly once (so two creators
// never both win) under the home's creation lock, so a file found empty
// while holding it was left by a creator that died, never by one at
// work: that one is replaced.
func (f *files) create(name, engine string, fill func(kv.Engine) (*vfs.Vault, error)) (*vfs.Vault, error) {
	unlock, err := f.lockCreate()
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := f.path(name)
	eng, err := engines.Create(path, engine)
	if errors.Is(err, fs.ErrExist) && f.home.removeIncomplete(name) {
		eng, err = engines.Create(path, engine)
	}
	if errors.Is(err, fs.ErrExist) {
		return nil, vaultExists(name)
	}
	if err != nil {
		return nil, &errs.Error{Kind: errs.StorageError, Op: "vault create", Vault: name, Err: err}
	}
	v, err := fill(eng)
	if err != nil {
		eng.Close()
		_ = engines.Remove(path)
		return nil, err
	}
	return v, nil
}

// lockCreate takes the home's creation lock (an flock on $AVFS_HOME/.lock,
// released by the kernel if the process dies).
func (f *files) lockCreate() (func(), error) {
	lf, err := os.OpenFile(filepath.Join(f.home.Dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "vault create", Err: err}
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		lf.Close()
		return nil, &errs.Error{Kind: errs.IoError, Op: "vault create", Err: err}
	}
	// Unlock explicitly: a child forked meanwhile holds the same open file
	// until it execs, and Close alone would leave the lock to that copy.
	return func() { _ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN); lf.Close() }, nil
}

// names lists the vault files; files that are not named as vaults are
// skipped.
func (f *files) names() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "vault list", Err: err}
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), Ext)
		if ok && !e.IsDir() && CheckName(name) == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
