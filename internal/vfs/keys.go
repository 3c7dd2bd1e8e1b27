package vfs

import "encoding/binary"

// The key schema. Every record of a vault lives in one ordered key space;
// integers are fixed-width big-endian so that byte order is numeric order.
//
//	"\x00avfs"                      header: magic, format version, features (JSON)
//	"M" name                        vault metadata (top layer, topology counter, allocator, quota, fork base, origin, settings)
//	"L" layer:8                     layer record: parent layer, frozen flag, usage counters
//	"K" name                        checkpoint: the frozen layer it names
//	"P" name                        fork pin: a fork of this vault depends on this frozen layer
//	"C" sha256:32                   chunk data, stored once per vault file
//	"J" layer:8 vkey                journal: versioned keys written in a layer (diff, compaction)
//
// Versioned keys carry the layer that wrote them as an 8-byte suffix holding
// the bitwise complement of the layer id, so the versions of one record sort
// newest layer first and a single range scan finds the version visible from
// any layer chain. An empty value is a whiteout: the record was deleted in
// that layer.
//
//	"I" ino:8 ^layer:8                      inode record
//	"D" dir:8 name 0x00 ^layer:8            directory entry: child ino:8, type:1
//	"F" ino:8 gen:8 index:8 ^layer:8        chunk map: sha256 of the chunk at index
//	"X" ino:8 name 0x00 ^layer:8            extended attribute: 0x01 value
//
// Names cannot contain 0x00, so the terminator keeps one record's versions
// together and apart from every other name's.
const (
	headerKey = "\x00avfs"

	prefixMeta       = 'M'
	prefixLayer      = 'L'
	prefixCheckpoint = 'K'
	prefixPin        = 'P'
	prefixChunk      = 'C'
	prefixJournal    = 'J'

	prefixInode  = 'I'
	prefixDentry = 'D'
	prefixFile   = 'F'
	prefixXattr  = 'X'
)

// Metadata names under "M".
const (
	metaTop       = "top"       // u64: the writable layer
	metaTopo      = "topo"      // u64: bumped whenever the layer graph changes
	metaNextIno   = "next_ino"  // u64: next inode number (and data generation)
	metaNextLayer = "nextlayer" // u64: next layer id
	metaQuota     = "quota"     // JSON Quota
	metaBase      = "base"      // JSON forkBase, only in forks
	metaGC        = "gc"        // token of a collection between its mark and its sweep (gc.go)
	metaGCStat    = "gcstat"    // JSON gcStat: what the last collection saw
)

func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func metaKey(name string) []byte { return append([]byte{prefixMeta}, name...) }

func layerKey(id uint64) []byte { return u64([]byte{prefixLayer}, id) }

func checkpointKey(name string) []byte { return append([]byte{prefixCheckpoint}, name...) }

func pinKey(name string) []byte { return append([]byte{prefixPin}, name...) }

func chunkKey(sum []byte) []byte { return append([]byte{prefixChunk}, sum...) }

func journalKey(layer uint64, vkey []byte) []byte {
	return append(u64([]byte{prefixJournal}, layer), vkey...)
}

// Versioned record keys without their layer suffix ("vkeys").

func inodeVKey(ino Ino) []byte { return u64([]byte{prefixInode}, uint64(ino)) }

func dentryVKey(dir Ino, name string) []byte {
	k := make([]byte, 0, 1+8+len(name)+1+8)
	k = u64(append(k, prefixDentry), uint64(dir))
	return append(append(k, name...), 0)
}

func dentryDirPrefix(dir Ino) []byte { return u64([]byte{prefixDentry}, uint64(dir)) }

func chunkVKey(ino Ino, gen, index uint64) []byte {
	return u64(u64(u64([]byte{prefixFile}, uint64(ino)), gen), index)
}

func chunkGenPrefix(ino Ino, gen uint64) []byte {
	return u64(u64([]byte{prefixFile}, uint64(ino)), gen)
}

func xattrVKey(ino Ino, name string) []byte {
	k := append(u64([]byte{prefixXattr}, uint64(ino)), name...)
	return append(k, 0)
}

func xattrInoPrefix(ino Ino) []byte { return u64([]byte{prefixXattr}, uint64(ino)) }

// versionKey appends the layer suffix to a versioned key.
func versionKey(vkey []byte, layer uint64) []byte {
	k := make([]byte, len(vkey), len(vkey)+8)
	copy(k, vkey)
	return u64(k, ^layer)
}

// splitVersion splits a versioned key into its vkey and layer.
func splitVersion(key []byte) (vkey []byte, layer uint64, ok bool) {
	if len(key) < 9 {
		return nil, 0, false
	}
	n := len(key) - 8
	return key[:n], ^binary.BigEndian.Uint64(key[n:]), true
}

// dentryName returns the name inside a dentry or xattr vkey ("D"/"X" ino name 0x00).
func vkeyName(vkey []byte) string {
	if len(vkey) < 10 {
		return ""
	}
	return string(vkey[9 : len(vkey)-1])
}

func vkeyIno(vkey []byte) Ino {
	if len(vkey) < 9 {
		return 0
	}
	return Ino(binary.BigEndian.Uint64(vkey[1:9]))
}
