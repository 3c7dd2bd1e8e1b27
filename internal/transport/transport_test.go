package transport

import (
	"context"
	"slices"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

type named string

func (n named) Name() string { return string(n) }
func (n named) Start(context.Context, Spec) (Workspace, error) {
	return nil, errs.New(errs.IoError, "start", "not a real transport")
}

// TestRegistry: the first transport is the default, an unknown name is
// InvalidInput naming the known ones, and a name given twice is refused.
func TestRegistry(t *testing.T) {
	r, err := NewRegistry(named("fuse"), named("overlay"))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"fuse", "overlay"}) {
		t.Errorf("Names = %v", got)
	}
	for name, want := range map[string]string{"": "fuse", "fuse": "fuse", "overlay": "overlay"} {
		tr, err := r.Get(name)
		if err != nil || tr.Name() != want {
			t.Errorf("Get(%q) = %v, %v; want %s", name, tr, err, want)
		}
	}
	if _, err := r.Get("nfs"); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("Get(nfs) = %v, want InvalidInput", err)
	}
	if _, err := NewRegistry(named("fuse"), named("fuse")); err == nil {
		t.Error("a transport registered twice was accepted")
	}
	empty, _ := NewRegistry()
	if _, err := empty.Get(""); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("the default of no transports = %v, want InvalidInput", err)
	}
}
