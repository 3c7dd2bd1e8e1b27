package vfs

import (
	"crypto/sha256"
	"encoding/binary"
)

// ContentKey names what regular file ino reads, from its chunk map alone
// (no chunk data is read): a SHA-256 over the size and, per chunk, its
// hash or a hole. Two files with the same key read the same bytes; two
// that read the same bytes usually have the same key (not always: a
// chunk stored with trailing zeros and one stored without read alike).
// A content-addressed store names its files by it.
func (t *Tx) ContentKey(ino Ino) ([sha256.Size]byte, error) {
	var key [sha256.Size]byte
	n, err := t.fileInode("content key", ino)
	if err != nil {
		return key, err
	}
	h := sha256.New()
	h.Write([]byte("avfs content key v1\x00"))
	h.Write(binary.BigEndian.AppendUint64(nil, n.Size))
	hole := make([]byte, sha256.Size)
	for i := uint64(0); i*ChunkSize < n.Size; i++ {
		sum, _, ok, err := t.chunkRef(n, i)
		if err != nil {
			return key, err
		}
		if !ok {
			h.Write([]byte{0})
			h.Write(hole)
			continue
		}
		h.Write([]byte{1})
		h.Write(sum)
	}
	h.Sum(key[:0])
	return key, nil
}
