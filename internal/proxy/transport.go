package proxy

import (
	"syscall"

	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/sandbox"
	"github.com/agentvfs/agentvfs/internal/transport"
)

// TransportAuto lets the run choose its transport (chooseTransport).
const TransportAuto = "auto"

// Transport names the runs choose between.
const (
	transportFUSE    = "fuse"
	transportOverlay = "overlay"
)

// availabler is a transport that can say, before anything is touched,
// whether the kernel lets this process use it.
type availabler interface{ Available() error }

// userNamespacer is an overlay transport that says whether this
// process's runs are mounted in a user namespace of their own (it is not
// root) rather than on the host.
type userNamespacer interface{ UserNamespace() bool }

// enterer is a workspace mounted only where a command enters it (a user
// namespace overlay, package overlaymount): Enter is the argv and the
// process attributes that run argv there, in its dir cwd, with the entry
// helper's setup pipe at setupFD.
type enterer interface {
	Dir() string
	Entered() bool
	Enter(argv []string, cwd string, setupFD int) ([]string, func(*syscall.SysProcAttr))
}

// choice is the transport a run starts, and why.
type choice struct {
	name   string
	reason string
}

// chooseTransport picks the transport of a workspace the run starts.
// auto takes overlay where this process can mount one and the run writes
// (the ingest is what makes it the vault's), FUSE otherwise, and says
// why: read-only runs read the live working state, and --keep-mount
// keeps a live mount, which only FUSE serves; a host without overlayfs
// has only FUSE. As root the overlay is mounted on the host; any other
// user's is mounted in the isolated run's own user namespace, so such a
// user's --isolate off run, or one where isolation is unavailable, takes
// FUSE. Root's overlay lingers as a FUSE mount does (its own server,
// Runtime.Lingering); a user's never does, its mount living in the
// command's own namespace: what stays warm for its next run is the layer
// cache.
func (rt *Runtime) chooseTransport(req Request) choice {
	if req.Transport != "" && req.Transport != TransportAuto {
		return choice{name: req.Transport, reason: "asked for with --transport"}
	}
	var ov transport.Transport
	if rt.Transports != nil {
		ov, _ = rt.Transports.Get(transportOverlay)
	}
	switch {
	case ov == nil:
		return choice{name: transportFUSE, reason: "overlay: no overlay transport in this runtime"}
	case req.Readonly:
		return choice{name: transportFUSE, reason: "overlay: read-only runs read the live working state through FUSE"}
	case req.KeepMount:
		return choice{name: transportFUSE, reason: "overlay: --keep-mount keeps a live mount, which only FUSE serves"}
	}
	if a, ok := ov.(availabler); ok {
		if err := a.Available(); err != nil {
			return choice{name: transportFUSE, reason: "overlay unavailable: " + err.Error()}
		}
	}
	if u, ok := ov.(userNamespacer); !ok || !u.UserNamespace() {
		return choice{name: transportOverlay, reason: "overlayfs mounts here (root in the initial user namespace)"}
	}
	// Not root: the overlay is mounted in a user namespace of the run's
	// own, which only an isolated run already lives in. --isolate off
	// promises a plain process of the host, which a user namespace is not
	// (other users' files show as nobody, set-uid programs do not work).
	if mode, _ := sandbox.ParseMode(req.Isolate); mode == sandbox.Off {
		return choice{name: transportFUSE, reason: "overlay: not root, so it would be mounted in a user namespace, and --isolate off runs the command as a plain process of the host"}
	}
	if _, err := rt.isolationAvailable(); err != nil {
		return choice{name: transportFUSE, reason: "overlay: not root, and the run cannot be isolated here for its user namespace: " + err.Error()}
	}
	return choice{name: transportOverlay, reason: "overlayfs in the run's own user namespace (not root: user.overlay.* markers, userxattr); it never lingers: the mount lives in the command's namespace"}
}

// overlayStats is what an overlay workspace reports of its start and
// ingest (package overlaymount).
type overlayStats interface {
	Prepared() overlay.Prepared
	Finished() *overlay.Finished
}

// overlayInfo fills the envelope's overlay record from ws, if it is an
// overlay workspace.
func overlayInfo(ws transport.Workspace) *OverlayInfo {
	s, ok := ws.(overlayStats)
	if !ok {
		return nil
	}
	p := s.Prepared()
	oi := &OverlayInfo{Lowers: len(p.Lowers), Materialized: p.Built, MaterializeMs: p.Ms,
		MaterializedFiles: p.Stats.Files, MaterializedBytes: p.Stats.Bytes}
	if f := s.Finished(); f != nil {
		oi.IngestMs = f.Ms
		oi.IngestedFiles = f.Stats.Written
		oi.IngestedBytes = f.Stats.Bytes
		oi.Deleted = f.Stats.Deleted
		oi.Reused = f.Adopted
		oi.UpperBoundBytes = f.UpperBound
	}
	return oi
}

// OverlayInfo is what an overlay run cost: finding or materializing its
// lower layers, and ingesting its upper dir.
type OverlayInfo struct {
	Lowers            int     `json:"lowers"`       // lower dirs stacked
	Materialized      bool    `json:"materialized"` // a layer was written for this run
	MaterializeMs     float64 `json:"materialize_ms"`
	MaterializedFiles int     `json:"materialized_files"`
	MaterializedBytes int64   `json:"materialized_bytes"`
	IngestMs          float64 `json:"ingest_ms"`
	IngestedFiles     int     `json:"ingested_files"` // files read back from the upper dir
	IngestedBytes     int64   `json:"ingested_bytes"`
	Deleted           int     `json:"deleted"` // names whiteouts and opaque dirs removed
	// Reused: the upper dir became the cached form of the run's layer,
	// so the next run on it materializes nothing.
	Reused bool `json:"reused"`
	// UpperBoundBytes is the size of the tmpfs the run's upper dir was
	// on, so that a runaway write failed with ENOSPC in the command (a
	// vault with a size quota); 0: the upper was not bounded.
	UpperBoundBytes int64 `json:"upper_bound_bytes"`
}
