// Package transport is the seam between a vault and the directory a
// command works in. A Transport gives a vault a workspace directory and
// takes it back: FUSE serves the vault live from a separate process
// (package fusemount); other transports may materialize it instead. `avfs
// mount` and `proxy exec` only ever talk to this interface, and the
// envelope and `avfs mounts` name the transport that served.
package transport

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Spec is the workspace to start.
type Spec struct {
	Home  *registry.Home
	Vault string
	// Dir is the existing directory the workspace is given at; it is
	// absolute with symlinks resolved.
	Dir      string
	ReadOnly bool
	// OwnerPID ends the workspace when that process exits, however it
	// exits (0: it outlives its caller until closed).
	OwnerPID int
	// IdleTimeout ends the workspace once it has served nothing for that
	// long and nothing holds it (0: never).
	IdleTimeout time.Duration
	// OneRun says the workspace serves one command and is ingested when
	// it ends (a proxy run): its fsyncs need not reach the disk, as a
	// host crash during the run drops the run whole. A mount the host
	// works in for as long as it likes leaves it false.
	OneRun bool
}

// Info says what serves a started workspace.
type Info struct {
	Transport string // the Transport's Name
	Vault     string
	Dir       string
	PID       int // the serving process (0: none)
	ReadOnly  bool
}

// Workspace is a vault given as a directory.
type Workspace interface {
	// Dir is where the vault is: the command's working tree.
	Dir() string
	Info() Info
	// Persist makes every write made in Dir so far part of the vault, so
	// that a reader opening the vault beside the workspace (a checkpoint,
	// a change summary) sees them. Its error is the transport's, typed;
	// a workspace that cannot persist fails rather than lose writes
	// silently.
	Persist(ctx context.Context) error
	// Close takes the workspace back and returns once the vault holds
	// every write made in it and nothing of the workspace is left
	// serving. A workspace still in use by processes that outlived the
	// command is detached and finishes when they let go. When ctx ends
	// during the wait the error is Interrupted and the workspace
	// finishes by itself.
	Close(ctx context.Context) error
}

// Finisher is a Workspace that opens the vault itself to close (the
// overlay's ingest): CloseWith is Close, then fn on that same open vault
// before the workspace lets go of it, so a caller that reads or writes
// the vault right after (the proxy's change summary) does not open it
// again: a SQLite vault's last close costs a WAL checkpoint and its
// fsync. fn does not run when the close fails; its error is CloseWith's.
type Finisher interface {
	CloseWith(ctx context.Context, fn func(*vfs.Vault) error) error
}

// Transport starts workspaces of one kind.
type Transport interface {
	// Name is how users and envelopes call it: "fuse", "overlay".
	Name() string
	// Start gives spec.Vault a workspace at spec.Dir and returns once it
	// answers. It fails with the vault's typed errors (VaultLocked when
	// another writer holds the vault, FuseUnavailable or MountFailed
	// when the kernel cannot serve it) and with Interrupted when ctx
	// ends first, having stopped whatever it started.
	Start(ctx context.Context, spec Spec) (Workspace, error)
}

// Registry is the transports a program knows, by name. Its first
// transport is the default.
type Registry struct {
	order  []string
	byName map[string]Transport
}

// NewRegistry knows ts; the first is the default. A name given twice is
// an error.
func NewRegistry(ts ...Transport) (*Registry, error) {
	r := &Registry{byName: map[string]Transport{}}
	for _, t := range ts {
		if _, dup := r.byName[t.Name()]; dup {
			return nil, fmt.Errorf("transport %q registered twice", t.Name())
		}
		r.order = append(r.order, t.Name())
		r.byName[t.Name()] = t
	}
	return r, nil
}

// Names lists the registered transports, default first.
func (r *Registry) Names() []string { return slices.Clone(r.order) }

// Get is the transport called name ("" is the default). An unknown name
// is InvalidInput naming those there are.
func (r *Registry) Get(name string) (Transport, error) {
	if name == "" && len(r.order) > 0 {
		name = r.order[0]
	}
	if t, ok := r.byName[name]; ok {
		return t, nil
	}
	return nil, &errs.Error{Kind: errs.InvalidInput, Op: "transport",
		Err: fmt.Errorf("unknown transport %q (known: %s)", name, strings.Join(r.order, ", "))}
}
