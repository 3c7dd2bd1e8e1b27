package kv

import "errors"

// Space capabilities. Deleting a key frees room inside an engine's file,
// which later writes reuse, but gives nothing back to the host: a vault
// whose data was overwritten 600,000 times stayed at 11.4 GiB after all
// but eleven of its chunks were freed. Engines that can hand the room
// back say so by implementing these interfaces.

// ErrNoReclaim is returned by Reclaim and Rewrite on an engine that cannot
// give space back to the host.
var ErrNoReclaim = errors.New("kv: the engine cannot give free space back")

// Space is how an engine's file uses the disk.
type Space struct {
	// FileBytes is what the engine's files take on disk, side files (a
	// write-ahead log) included.
	FileBytes int64 `json:"file_bytes"`
	// FreeBytes is room inside the file that holds no data: later writes
	// reuse it, Reclaim or Rewrite give it back.
	FreeBytes int64 `json:"free_bytes"`
	// UsedBytes is the room that holds data as of the last commit, side
	// files included: what the file would take with no free room. It
	// grows with every write that needs new room, even one still in a
	// log, where FileBytes may lag behind.
	UsedBytes int64 `json:"used_bytes"`
	// Incremental reports that Reclaim can give free room back a bounded
	// piece at a time; otherwise only Rewrite can.
	Incremental bool `json:"incremental"`
}

// Spacer is implemented by engines that can tell how their file uses the
// disk.
type Spacer interface {
	Space() (Space, error)
}

// Reclaimer is implemented by engines that give free room back to the
// host.
type Reclaimer interface {
	Spacer
	// Reclaim gives back at most limit bytes of free room (all of it when
	// limit <= 0) in one short write transaction, and returns how many bytes
	// the file shrank by. It returns 0 and no error when Space().Incremental
	// is false: the file then shrinks only by Rewrite. It waits for the
	// write lock as Update does.
	Reclaim(limit int64) (int64, error)
	// Rewrite copies the live data into a new file that replaces the old
	// one, so that it holds no free room, and switches the file to
	// incremental reclaim where the engine has it. It holds the engine's
	// write lock for as long as the copy takes, O(file): writers wait,
	// readers go on. It must not be called inside View or Update.
	Rewrite() error
}

// SizeScanner is implemented by transactions that can list keys with the
// size of their values without reading the values: a 64 KiB value costs
// its overflow pages in SQLite, so listing a vault's chunks through Scan
// read the whole vault.
type SizeScanner interface {
	// ScanSizes is Scan with the length of each value instead of the value.
	ScanSizes(start, end []byte, fn func(key []byte, size int) (bool, error)) error
}

// ScanSizes lists keys and value sizes in tx, through SizeScanner when tx
// implements it and through Scan otherwise.
func ScanSizes(tx Tx, start, end []byte, fn func(key []byte, size int) (bool, error)) error {
	if s, ok := tx.(SizeScanner); ok {
		return s.ScanSizes(start, end, fn)
	}
	return tx.Scan(start, end, func(k, v []byte) (bool, error) { return fn(k, len(v)) })
}

// KeyScanner is implemented by transactions that can list keys without
// their values: SQLite answers from the key index alone, so listing a
// vault's chunks neither reads their pages nor fills a cache with them.
type KeyScanner interface {
	// ScanKeys is Scan without the values.
	ScanKeys(start, end []byte, fn func(key []byte) (bool, error)) error
}

// ScanKeys lists the keys in tx, through KeyScanner when tx implements it
// and through Scan otherwise.
func ScanKeys(tx Tx, start, end []byte, fn func(key []byte) (bool, error)) error {
	if s, ok := tx.(KeyScanner); ok {
		return s.ScanKeys(start, end, fn)
	}
	return tx.Scan(start, end, func(k, _ []byte) (bool, error) { return fn(k) })
}
