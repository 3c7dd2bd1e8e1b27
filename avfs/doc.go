// Package avfs is the Go API of avfs, a workspace runtime for AI agents:
// workspaces that can be saved, restored, forked and compared in constant
// time, mounted as ordinary directories, and driven one command at a time
// through a policy-gated proxy that reports what each command changed.
//
// # The model
//
// A Home is a directory (by default $AVFS_HOME, else ~/.avfs) holding named
// vaults; the avfs command line works on the same directory, so a program
// and the CLI can share one. A Vault is a complete POSIX filesystem kept in
// one database file (SQLite by default, or bbolt). It has one working
// state, which is what reads and writes see, and any number of checkpoints:
// named, frozen states. Saving a checkpoint freezes the working state and
// restoring one makes it the working state again; both take the same few
// milliseconds whatever the vault holds, because a vault is a stack of
// layers and neither copies anything. A fork (Home.Fork) is a new vault
// that starts as another vault's working state and then goes its own way,
// again without copying: give each agent, or each attempt, its own fork.
// Diff lists the paths that differ between any two states, of one vault or
// of a fork and its parent, reading only the layers that differ.
//
// Files are read and written by path (Vault.ReadFile, Vault.WriteFile,
// Vault.ReadDir, ...). Every call is one transaction: a write is all or
// nothing, and quotas are checked inside it.
// Vault.FS and Vault.FSAt give a state (the working state, a checkpoint,
// a proxy run's before and after) as an io/fs file system.
//
// # Mounts and commands
//
// Home.Mount serves a vault as a directory through FUSE, so that any
// program can use it. The mount is served by its own avfs process, started
// exactly as `avfs mount` starts it: go-fuse documents deadlocks when one
// process both serves a mount and uses its files. This package therefore
// needs the avfs program for mounts and for Exec: it is taken from
// WithBinary, else $AGENTVFS_BIN, else `avfs` on PATH, else the running
// program when that is avfs; without one these calls fail with
// BinaryNotFound. On a host
// without FUSE (no /dev/fuse on Linux, no macFUSE on macOS) they fail with
// FuseUnavailable before starting anything.
//
// Home.Exec runs one top-level command the way `avfs proxy exec` does:
// the policy classifies it first (allow, allow with a checkpoint, require
// a person's approval, or deny) and a refused command touches nothing;
// otherwise a checkpoint of the state before the run is saved, the vault
// is mounted, the command runs with its working directory inside the
// mount, and the returned Envelope lists the paths it changed. Undo
// restores the checkpoint of a run. This is a boundary around the
// top-level command, not a sandbox: what an allowed program does inside
// (open a socket, read files outside the vault) is not watched. Use OS
// isolation beside avfs for code that may be hostile.
//
// # Errors
//
// Every error is an *Error carrying a Kind, the stable name the CLI prints
// in its JSON error documents (docs/json-contract.md). Test it with
// IsKind(err, VaultNotFound), errors.Is(err, VaultNotFound), or
// errors.As(err, &e) with e an *Error.
//
// # Types and contexts
//
// The package defines every type it returns (none is an internal one, so
// go doc shows their fields): durations are time.Duration, times are
// time.Time in UTC, and states, kinds and modes are typed string enums
// whose values are the strings the CLI prints. Every call that can block
// takes a context.Context first; one whose context has already ended does
// nothing and returns an Interrupted error.
//
// A vault mounted read-write has one writer, its mount: writes through
// this package then fail with VaultLocked until it is unmounted; reads,
// checkpoints and forks go on beside it.
package avfs
