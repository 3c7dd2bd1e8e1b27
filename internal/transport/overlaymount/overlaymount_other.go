//go:build !linux

package overlaymount

import (
	"context"
	"errors"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/transport"
)

// Transport is the overlay transport where there is no overlayfs: it is
// never available, and auto runs take FUSE.
type Transport struct {
	Root   string
	Budget int64
	Exe    func() (string, error)
}

var _ transport.Transport = (*Transport)(nil)

// New is the overlay transport with its cache in root.
func New(root string) *Transport { return &Transport{Root: root} }

// UserNamespace is false: there is no overlay to enter.
func (*Transport) UserNamespace() bool { return false }

// Name is "overlay".
func (*Transport) Name() string { return Name }

// Available says why not: overlayfs is Linux's.
func (*Transport) Available() error {
	return &errs.Error{Kind: errs.IoError, Op: "overlay", Err: errors.New("overlayfs is a Linux file system")}
}

// Start fails as Available does.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Workspace, error) {
	return nil, t.Available()
}

// Recover has nothing to do: no overlay run ever ran here.
func Recover(h *registry.Home, vault, root string) ([]overlay.Recovered, error) { return nil, nil }

// Waiting is none: no overlay run ever ran here.
func Waiting(h *registry.Home, vault, id, root string) []string { return nil }

// Freed has nothing to drop: no layer is ever cached here.
func Freed(root, vaultID string, layers []uint64) error { return nil }

// Follow has only Freed and BeforeOpen to leave as they are: no overlay
// run ever ran here.
func Follow(h *registry.Home, root func() (string, bool), skip func() bool, warn func(string)) {}
