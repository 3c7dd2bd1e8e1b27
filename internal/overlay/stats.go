package overlay

import "github.com/agentvfs/agentvfs/internal/vfs"

// The costs a run reports, on every platform (the envelope carries them);
// the rest of the package is Linux's.

// MatStats counts what Materialize wrote.
type MatStats struct {
	Files int   // names written, directories included
	Bytes int64 // file data written
	// The Shared layout's share of it: Stored is the part written into
	// the content store, Reused the data the store held already (not in
	// Bytes).
	Stored int64
	Reused int64
}

// IngestStats counts what an ingest did.
type IngestStats struct {
	Written int   // files whose content was read from the upper dir
	Bytes   int64 // bytes of those files (hashed; only changed chunks are stored)
	Deleted int   // names removed by whiteouts and opaque dirs
	Dirs    int   // directories of the upper dir walked
}

// Prepared is the lower stack of a state, ready to mount.
type Prepared struct {
	Lowers []string // newest first
	Data   []string // data-only lower layers (the Shared layout's store)
	Top    string   // key of the newest entry
	Built  bool     // a base was materialized for this state, or its deltas merged (merge.go)
	Stats  MatStats
	Ms     float64 // time spent finding or building the stack
}

// Finished is what Finish did.
type Finished struct {
	Stats   IngestStats
	Sealed  vfs.Sealed
	Adopted bool // the upper became the cache entry of the sealed layer
	// UpperBound is the size of the tmpfs the upper was on (a vault with
	// a size quota), 0 when it was not bounded.
	UpperBound int64
	Ms         float64 // the ingest's time
}

// Recovered is what Recover found of one run a crash left.
type Recovered struct {
	Dir      string
	Ingested bool // its upper was ingested now
	Err      error
}
