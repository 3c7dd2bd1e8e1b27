package mountd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// CheckWriter returns nil when this process may write to vault: no live
// process mounts it read-write, or the one that does was an idle-timeout
// mount (idle.go) and has given way. Otherwise it returns VaultLocked
// naming the mountpoint. CLI writes call it first.
func CheckWriter(h *registry.Home, vault string) error {
	mnt, live := mountrec.Writer(h, vault)
	if !live {
		return nil
	}
	rerr := reclaim(h, vault, mnt)
	if rerr == nil {
		return nil
	}
	e := mountrec.LockedErr(vault, mnt)
	switch {
	case errs.Is(rerr, MountBusy):
		e.Err = fmt.Errorf("%w, which would end when idle but has files in use", e.Err)
		e.Hint = "wait for the processes working in the mount to finish, or unmount it"
	case errs.Is(rerr, errs.VaultLocked):
		var le *errs.Error
		holder := any("?")
		if errors.As(rerr, &le) && le.Extra != nil {
			holder = le.Extra["holder"]
		}
		e.Err = fmt.Errorf("%w, which would end when idle but is in use (%v)", e.Err, holder)
		e.Hint = "wait for the proxy run to finish"
	}
	return e
}

// Persist has every live read-write mount of vault persist what it
// buffers, so that a reader opening the vault beside it (the CLI's cat,
// export, checkpoint save; a proxy run's checkpoint and change summary)
// sees every write made through the mount before it asked, not the
// server's last commit with files still empty. The mount's server is
// asked ("flush" on its control socket: an overlay mount's server
// ingests its upper dir); a FUSE mount without a control socket is
// fsynced instead (docs/architecture.md, Mount). A mount that
// cannot be listed or persisted fails it with IoError: a read without
// the mount's writes would be wrong, silently. With no mount of vault it
// returns nil. It is the registry's BeforeOpen hook.
func Persist(h *registry.Home, vault string) error {
	if _, err := os.Stat(mountrec.Dir(h)); errors.Is(err, fs.ErrNotExist) {
		return nil // nothing was ever mounted from this home
	}
	infos, err := mountrec.List(h)
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "persist", Vault: vault,
			Err: fmt.Errorf("listing the mounts whose writes to persist: %w", err)}
	}
	for _, in := range infos {
		if in.Vault != vault || in.ReadOnly || !in.Live {
			continue
		}
		err := Call(h, in.Mountpoint, "flush", nil, nil)
		if errors.Is(err, ErrNoControl) && in.Transport == mountrec.FUSE {
			err = fsyncDir(in.Mountpoint)
		}
		if err != nil {
			return &errs.Error{Kind: errs.KindOf(err), Op: "persist", Path: in.Mountpoint, Vault: vault,
				Err: fmt.Errorf("persisting the mount's writes before reading the vault: %w", err)}
		}
	}
	return nil
}

// fsyncDir fsyncs the root of a mount, which persists everything its
// server buffers.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Path: dir, Err: err}
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return &errs.Error{Kind: errs.IoError, Path: dir, Err: err}
	}
	return nil
}

// Prepare checks a mount about to be started by hand (`avfs mount`, the
// library's Home.Mount) and returns its clean mountpoint: the vault's
// name must be valid, and a read-write mount fails early with
// VaultLocked while the vault has another writer (or lets an idle mount
// of it give way).
func Prepare(h *registry.Home, vault, mountpoint string, readonly bool) (string, error) {
	if err := registry.CheckName(vault); err != nil {
		return "", err
	}
	mnt, err := CleanMountpoint(mountpoint)
	if err != nil {
		return "", err
	}
	if !readonly {
		if err := CheckWriter(h, vault); err != nil {
			return "", err
		}
	}
	return mnt, nil
}
