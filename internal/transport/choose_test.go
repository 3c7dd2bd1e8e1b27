package transport

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// gated is a transport that says whether it is available.
type gated struct {
	named
	err error
}

func (g gated) Available() error { return g.err }

// TestForMount: one row per question a mount can ask. auto takes FUSE
// wherever FUSE works, overlay only where it does not; a name asked for
// is taken or refused with its transport's own error.
func TestForMount(t *testing.T) {
	noFUSE := errs.New(errs.FuseUnavailable, "mount", "no /dev/fuse")
	notRoot := errs.New(errs.PermissionDenied, "overlay", "mounting an overlay needs root")
	for _, c := range []struct {
		ask      string
		fuse, ov error
		want     string
		reason   string
		kind     errs.Kind
	}{
		{ask: "", want: "fuse", reason: AutoFUSE},
		{ask: Auto, want: "fuse", reason: AutoFUSE},
		{ask: Auto, ov: notRoot, want: "fuse", reason: AutoFUSE},
		{ask: Auto, fuse: noFUSE, want: "overlay", reason: "auto: overlay, as FUSE is unavailable here: " + noFUSE.Error()},
		{ask: Auto, fuse: noFUSE, ov: notRoot, kind: errs.FuseUnavailable},
		{ask: "overlay", want: "overlay", reason: AskedFor},
		{ask: "overlay", ov: notRoot, kind: errs.PermissionDenied},
		{ask: "fuse", ov: notRoot, want: "fuse", reason: AskedFor},
		{ask: "nfs", kind: errs.InvalidInput},
	} {
		r, err := NewRegistry(named("fuse"), gated{named("overlay"), c.ov})
		if err != nil {
			t.Fatal(err)
		}
		tr, reason, err := ForMount(r, c.ask, func() error { return c.fuse })
		if c.kind != "" {
			if !errs.Is(err, c.kind) {
				t.Errorf("ForMount(%q, fuse %v, overlay %v) = %v, want %s", c.ask, c.fuse, c.ov, err, c.kind)
			}
			continue
		}
		if err != nil || tr.Name() != c.want || reason != c.reason {
			t.Errorf("ForMount(%q, fuse %v, overlay %v) = %v %q %v; want %s %q", c.ask, c.fuse, c.ov, tr, reason, err, c.want, c.reason)
		}
	}
}
