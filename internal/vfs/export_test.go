package vfs

// SetGCAfterMark makes every collection call fn between its mark and its
// sweep, until the returned function restores the default.
func SetGCAfterMark(fn func()) (restore func()) {
	gcAfterMark = fn
	return func() { gcAfterMark = nil }
}

// ChunkKeyPrefix is the first byte of a chunk's data key.
const ChunkKeyPrefix = prefixChunk
