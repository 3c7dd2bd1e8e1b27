package kv

// Capabilities says what an engine can do, so that code above kv asks
// what an engine does instead of which engine it is.
type Capabilities struct {
	// SharedOpen means another process may open and write the store while
	// this one holds it open (SQLite in WAL mode). When false an open store
	// is locked to its process (bbolt's flock), and a second open can only
	// wait for it.
	SharedOpen bool
	// DataFiles are the suffixes of files beside the main file that hold
	// the store's data (SQLite's "-wal"): they count in its size.
	DataFiles []string
	// SideFiles are the suffixes of the other files the engine makes
	// beside the main file (locks, indexes): removed with it, not counted.
	SideFiles []string
}

// Capable is implemented by engines that declare their capabilities.
type Capable interface {
	Capabilities() Capabilities
}
