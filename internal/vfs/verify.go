package vfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Reads are verified: a chunk is stored under the SHA-256 of its content
// (keys.go), so content that does not hash to its key is damage of the
// vault file, and reading it is CorruptVault (EIO) rather than wrong
// bytes. Hashing every chunk at every read would cost a read of a tree
// more than the bytes are worth (internal/bench, "verify"), so a Vault
// remembers the chunks it has verified and checks each once: a chunk's
// content cannot change under its key but by damage, and damage after the
// first read of a process is beyond what a check at read time can promise.
// Chunks a Vault stored itself count as verified: their hash was just
// computed from the bytes written.

// VerifyMode says how reads check chunks against their hashes.
type VerifyMode int32

const (
	VerifyOnce   VerifyMode = iota // each chunk once per Vault value (the default)
	VerifyAlways                   // every chunk at every read
	VerifyOff                      // never (for measuring the check)
)

// maxVerified bounds the chunks a Vault remembers as verified (about
// 2 MiB for 16,384 chunks, 1 GiB of data); when full it starts over.
const maxVerified = 1 << 14

// verifier is a Vault's record of the chunks it verified.
type verifier struct {
	mu   sync.Mutex
	mode VerifyMode
	seen map[[sha256.Size]byte]struct{}
}

// SetVerifyReads sets how this Vault's reads check chunks.
func (v *Vault) SetVerifyReads(m VerifyMode) {
	v.verify.mu.Lock()
	v.verify.mode = m
	v.verify.seen = nil
	v.verify.mu.Unlock()
}

// checkChunk returns a CorruptVault error when data does not hash to sum,
// the key it was stored under; ino is the inode it was read for.
func (v *Vault) checkChunk(sum, data []byte, ino Ino) error {
	var key [sha256.Size]byte
	copy(key[:], sum)
	f := &v.verify
	f.mu.Lock()
	mode := f.mode
	_, done := f.seen[key]
	f.mu.Unlock()
	if mode == VerifyOff || mode == VerifyOnce && done {
		return nil
	}
	if sha256.Sum256(data) != key {
		return &errs.Error{Kind: errs.CorruptVault, Op: "read", Errno: syscall.EIO,
			Err:   fmt.Errorf("chunk %x of inode %d does not match its hash: the vault file is damaged", sum[:8], ino),
			Hint:  "run `avfs fsck`; restore the file from a copy or a checkpoint",
			Extra: map[string]any{"chunk": hex.EncodeToString(sum)}}
	}
	if mode == VerifyOnce {
		f.remember(key)
	}
	return nil
}

// wroteChunk records that this Vault stored data under sum, hashed by
// the write itself, so that reading it back costs no second hash.
func (v *Vault) wroteChunk(sum [sha256.Size]byte) {
	f := &v.verify
	f.mu.Lock()
	once := f.mode == VerifyOnce
	f.mu.Unlock()
	if once {
		f.remember(sum)
	}
}

func (f *verifier) remember(key [sha256.Size]byte) {
	f.mu.Lock()
	if f.seen == nil || len(f.seen) >= maxVerified {
		f.seen = make(map[[sha256.Size]byte]struct{}, 256)
	}
	f.seen[key] = struct{}{}
	f.mu.Unlock()
}
