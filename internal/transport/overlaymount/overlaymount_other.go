//go:build !linux

package overlaymount

import (
	"context"
	"errors"

	"github.com/agentvfs/agentvfs/internal/errs"
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
