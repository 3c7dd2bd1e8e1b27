// Package overlay serves a vault's state through the kernel's overlayfs
// instead of FUSE: the frozen layers under a run are materialized once
// into host directories (a Cache, keyed by the vault file and layer that
// hold them), stacked read-only under a fresh upper dir (Mount), and what
// the run left in the upper dir is turned back into the vault's top layer
// in one transaction (Ingest). Between the two the command runs at the
// speed of the host's disk: no request of its reaches a server.
//
// The upper dir of an ingested run is itself the materialized form of
// the layer the ingest sealed, so the cache adopts it as a delta entry
// over the run's lowers (as containerd reuses each committed upper): the
// next run on that state materializes nothing.
package overlay
