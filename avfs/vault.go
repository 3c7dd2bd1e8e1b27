package avfs

import (
	"context"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

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
func (v *Vault) Close() error { return wrapErr(v.v.Close()) }

// Checkpoint is a named, frozen state of a vault.
type Checkpoint struct {
	Name      string
	CreatedAt time.Time // UTC
	Message   string    // what the saver said of it; "" for none
	Bytes     int64     // the file content the state holds
	Files     int64     // the files, directories and links it holds
}

func checkpoint(c vfs.Checkpoint) Checkpoint {
	return Checkpoint{Name: c.Name, CreatedAt: c.CreatedAt, Message: c.Message, Bytes: c.Bytes, Files: c.Files}
}

// SaveCheckpoint freezes the working state as checkpoint name (a name is
// generated when name is empty) and goes on in a new working state, in
// O(1). Names are 1–128 characters of A-Z a-z 0-9 _ . -, not starting with
// - or .; a name in use is AlreadyExists.
func (v *Vault) SaveCheckpoint(ctx context.Context, name, message string) (Checkpoint, error) {
	if err := stopped(ctx, "checkpoint save"); err != nil {
		return Checkpoint{}, err
	}
	c, err := v.v.SaveCheckpoint(name, message)
	if err != nil {
		return Checkpoint{}, wrapErr(err)
	}
	return checkpoint(c), nil
}

// RestoreCheckpoint makes checkpoint name the working state again, in
// O(1). Unsaved changes are discarded; every checkpoint stays.
func (v *Vault) RestoreCheckpoint(ctx context.Context, name string) error {
	if err := stopped(ctx, "checkpoint restore"); err != nil {
		return err
	}
	return wrapErr(v.v.RestoreCheckpoint(name))
}

// Checkpoints lists the vault's checkpoints, oldest first.
func (v *Vault) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	if err := stopped(ctx, "checkpoint list"); err != nil {
		return nil, err
	}
	cs, err := v.v.Checkpoints()
	if err != nil {
		return nil, wrapErr(err)
	}
	out := make([]Checkpoint, len(cs))
	for i, c := range cs {
		out[i] = checkpoint(c)
	}
	return out, nil
}

// DeleteCheckpoint forgets checkpoint name (CheckpointNotFound when there
// is none). Its space is reclaimed by `avfs compact`.
func (v *Vault) DeleteCheckpoint(ctx context.Context, name string) error {
	if err := stopped(ctx, "checkpoint delete"); err != nil {
		return err
	}
	return wrapErr(v.v.DeleteCheckpoint(name))
}
