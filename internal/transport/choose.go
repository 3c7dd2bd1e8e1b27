package transport

import "errors"

// Auto asks for the transport the caller's own rule picks.
const Auto = "auto"

// Names of the transports a mount may ask for by name.
const (
	FUSE    = "fuse"
	Overlay = "overlay"
)

// availabler is a transport that can say, before anything is touched,
// whether the kernel lets this process use it (nil: yes).
type availabler interface{ Available() error }

// Available is t's own answer, or nil for a transport that cannot tell.
func Available(t Transport) error {
	if a, ok := t.(availabler); ok {
		return a.Available()
	}
	return nil
}

// Why a mount's transport was taken (ForMount).
const (
	AskedFor = "asked for with --transport"
	AutoFUSE = "auto: FUSE, the live view: every write through the mount is the vault's at once; " +
		"an overlay mount (--transport overlay) holds them in its upper dir until ingested"
)

// ForMount is the transport a mount that outlives its caller (`avfs
// mount`, the library's Home.Mount) takes when asked for name, and why.
// A name asked for is taken or refused with its transport's typed error
// (PermissionDenied: overlay as a user who is not root). auto, or "",
// takes FUSE: such a mount is a view the host works in for as long as
// it likes, and FUSE makes every write through it the vault's at once
// (durable at fsync); an overlay mount keeps the host's writes in its
// upper dir, under the runtime dir, until something ingests them (a read
// of the vault, a checkpoint, the unmount). auto takes overlay only where
// FUSE is unavailable and overlay is not.
func ForMount(r *Registry, name string, fuseAvailable func() error) (Transport, string, error) {
	if name != "" && name != Auto {
		t, err := r.Get(name)
		if err != nil {
			return nil, "", err
		}
		if err := Available(t); err != nil {
			return nil, "", err
		}
		return t, AskedFor, nil
	}
	ferr := fuseAvailable()
	if ferr == nil {
		t, err := r.Get(FUSE)
		return t, AutoFUSE, err
	}
	ov, err := r.Get(Overlay)
	if err != nil {
		return nil, "", ferr
	}
	if oerr := Available(ov); oerr != nil {
		return nil, "", errors.Join(ferr, oerr)
	}
	return ov, "auto: overlay, as FUSE is unavailable here: " + ferr.Error(), nil
}
