package vfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// fileInode loads ino and checks it is a regular file.
func (t *Tx) fileInode(op string, ino Ino) (*inode, error) {
	n, err := t.inode(ino)
	if err != nil {
		return nil, err
	}
	switch n.Type {
	case TypeFile:
		return n, nil
	case TypeDir:
		return nil, errs.E(op, "", syscall.EISDIR)
	}
	return nil, errs.E(op, "", syscall.EINVAL)
}

// chunkRef returns the hash of chunk index of n and the segment holding it;
// ok is false for a hole.
func (t *Tx) chunkRef(n *inode, index uint64) (sum []byte, segIdx int, ok bool, err error) {
	sum, segIdx, ok, err = t.get(chunkVKey(n.Ino, n.gen, index))
	if err == nil && ok && len(sum) != sha256.Size {
		err = corruptf("chunk map of inode %d index %d is malformed", n.Ino, index)
	}
	return sum, segIdx, ok, err
}

// chunkData returns the stored bytes of chunk index (nil for a hole). The
// stored bytes may be shorter than ChunkSize; the rest reads as zeros.
func (t *Tx) chunkData(n *inode, index uint64) ([]byte, error) {
	sum, segIdx, ok, err := t.chunkRef(n, index)
	if err != nil || !ok {
		return nil, err
	}
	data, err := t.txs[segIdx].Get(chunkKey(sum))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return nil, corruptf("chunk %x of inode %d is missing", sum[:8], n.Ino)
		}
		return nil, err
	}
	return data, t.v.checkChunk(sum, data, n.Ino)
}

// Read reads up to len(buf) bytes of file ino from offset off and returns
// how many it read: fewer only at the end of the file. Holes read as zeros.
func (t *Tx) Read(ino Ino, off int64, buf []byte) (int, error) {
	n, err := t.fileInode("read", ino)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errs.E("read", "", syscall.EINVAL)
	}
	size := int64(n.Size)
	if off >= size {
		return 0, nil
	}
	end := min(off+int64(len(buf)), size)
	for pos := off; pos < end; {
		index := uint64(pos / ChunkSize)
		within := pos % ChunkSize
		take := min(ChunkSize-within, end-pos)
		dst := buf[pos-off : pos-off+take]
		data, err := t.chunkData(n, index)
		if err != nil {
			return 0, err
		}
		c := 0
		if within < int64(len(data)) {
			c = copy(dst, data[within:])
		}
		clear(dst[c:])
		pos += take
	}
	return int(end - off), nil
}

// Write writes data into file ino at offset off, extending the file as
// needed. Only the chunks the range touches are rewritten.
func (t *Tx) Write(ino Ino, off int64, data []byte) (int, error) {
	const op = "write"
	if err := t.writable(op); err != nil {
		return 0, err
	}
	n, err := t.fileInode(op, ino)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errs.E(op, "", syscall.EINVAL)
	}
	if len(data) == 0 {
		return 0, nil
	}
	end := uint64(off) + uint64(len(data))
	newSize := max(n.Size, end)
	if err := t.checkFileSize(op, "", newSize); err != nil {
		return 0, err
	}
	c, err := t.stageCredit(n)
	if err != nil {
		return 0, err
	}
	if err := t.chargeCredit(op, "", int64(newSize-n.Size), 0, c); err != nil {
		return 0, err
	}
	for pos := uint64(off); pos < end; {
		index := pos / ChunkSize
		start := index * ChunkSize
		lo, hi := pos-start, min(end, start+ChunkSize)-start
		chunkLen := min(ChunkSize, newSize-start)
		src := data[pos-uint64(off) : pos-uint64(off)+(hi-lo)]
		var buf []byte
		if lo == 0 && hi == chunkLen {
			buf = src
		} else {
			old, err := t.chunkData(n, index)
			if err != nil {
				return 0, err
			}
			buf = make([]byte, chunkLen)
			copy(buf, old)
			copy(buf[lo:hi], src)
		}
		if err := t.putChunk(n, index, buf); err != nil {
			return 0, err
		}
		pos = start + hi
	}
	n.Size = newSize
	n.Mtime, n.Ctime = t.now, t.now
	return len(data), t.putInode(n)
}

// Seek finds, from offset off of file ino, the first byte of data (hole
// false: lseek's SEEK_DATA) or of a hole (hole true: SEEK_HOLE; the end
// of the file counts as one). Holes are chunks that store nothing, so the
// answer is chunk-aligned unless it is off itself or the end; a chunk
// with any data counts as data, as a disk's block does. ENXIO when off is
// at or past the end. SEEK_DATA skips a run of holes in as many lookups
// as the run holds chunks that were ever written, not chunks.
func (t *Tx) Seek(ino Ino, off uint64, hole bool) (uint64, error) {
	const op = "lseek"
	n, err := t.fileInode(op, ino)
	if err != nil {
		return 0, err
	}
	if off >= n.Size {
		return 0, errs.E(op, "", syscall.ENXIO)
	}
	last := (n.Size - 1) / ChunkSize
	for i := off / ChunkSize; i <= last; i++ {
		if !hole {
			next, found, err := t.nextChunkVersion(n, i)
			if err != nil {
				return 0, err
			}
			if !found || next > last {
				break
			}
			i = next
		}
		_, _, ok, err := t.chunkRef(n, i)
		if err != nil {
			return 0, err
		}
		if ok != hole {
			return max(off, i*ChunkSize), nil
		}
	}
	if hole {
		return n.Size, nil
	}
	return 0, errs.E(op, "", syscall.ENXIO)
}

// nextChunkVersion returns the lowest chunk index of n at or past from
// that has a version in some layer of the state, present or deleted.
func (t *Tx) nextChunkVersion(n *inode, from uint64) (uint64, bool, error) {
	end := kv.PrefixEnd(chunkGenPrefix(n.Ino, n.gen))
	var best uint64
	found := false
	for i, seg := range t.c.segs {
		err := t.txs[i].Scan(chunkVKey(n.Ino, n.gen, from), end, func(k, _ []byte) (bool, error) {
			vkey, layer, ok := splitVersion(k)
			if !ok || len(vkey) != 25 || !seg.layers[layer] {
				return true, nil
			}
			if idx := binary.BigEndian.Uint64(vkey[17:]); !found || idx < best {
				best, found = idx, true
			}
			return false, nil
		})
		if err != nil {
			return 0, false, err
		}
	}
	return best, found, nil
}

// ZeroRange makes length bytes of file ino from off read as zeros, as
// fallocate's FALLOC_FL_PUNCH_HOLE and FALLOC_FL_ZERO_RANGE do: chunks
// the range covers become holes, the others are rewritten. With keepSize
// the file keeps its size and nothing past its end changes; without it
// the file grows to off+length when that is past its end.
func (t *Tx) ZeroRange(ino Ino, off, length uint64, keepSize bool) error {
	const op = "fallocate"
	if err := t.writable(op); err != nil {
		return err
	}
	n, err := t.fileInode(op, ino)
	if err != nil {
		return err
	}
	end := off + length
	if length == 0 || end < off {
		return errs.E(op, "", syscall.EINVAL)
	}
	newSize := n.Size
	if !keepSize {
		newSize = max(n.Size, end)
	}
	if err := t.checkFileSize(op, "", newSize); err != nil {
		return err
	}
	if err := t.charge(op, "", int64(newSize-n.Size), 0); err != nil {
		return err
	}
	// Past the old end everything reads as zeros already.
	for pos := off; pos < min(end, n.Size); {
		index := pos / ChunkSize
		start := index * ChunkSize
		lo, hi := pos-start, min(end, start+ChunkSize)-start
		pos = start + hi
		var buf []byte // all zeros: a hole
		if lo > 0 || hi < min(ChunkSize, n.Size-start) {
			old, err := t.chunkData(n, index)
			if err != nil {
				return err
			}
			if uint64(len(old)) <= lo {
				continue // the stored bytes end before the range
			}
			buf = bytes.Clone(old)
			clear(buf[lo:min(hi, uint64(len(buf)))])
		}
		if err := t.putChunk(n, index, buf); err != nil {
			return err
		}
	}
	n.Size = newSize
	n.Mtime, n.Ctime = t.now, t.now
	return t.putInode(n)
}

// putChunk stores data as chunk index of n in the top layer. Data is kept
// once per vault file under its hash, without its trailing zeros (they read
// back as zeros), so equal content always has equal hashes; an all-zero
// chunk becomes a hole.
func (t *Tx) putChunk(n *inode, index uint64, data []byte) error {
	data = bytes.TrimRight(data, "\x00")
	var sum [sha256.Size]byte
	if len(data) > 0 {
		sum = sha256.Sum256(data)
	}
	return t.putChunkSum(n, index, data, sum)
}

// putChunkSum is putChunk for data already trimmed of its trailing zeros,
// with its hash (unused when data is empty).
func (t *Tx) putChunkSum(n *inode, index uint64, data []byte, sum [sha256.Size]byte) error {
	vkey := chunkVKey(n.Ino, n.gen, index)
	if len(data) == 0 {
		return t.del(vkey)
	}
	stored, err := t.storeChunk(sum[:], data)
	if err != nil {
		return err
	}
	if stored {
		t.v.wroteChunk(sum)
	}
	return t.put(vkey, sum[:])
}

// storeChunk writes chunk data under its hash unless this file has it,
// and reports whether it wrote it; finding it there, it tells a
// collection in progress (gc.go).
func (t *Tx) storeChunk(sum, data []byte) (bool, error) {
	ck := chunkKey(sum)
	have, err := kv.Has(t.own(), ck)
	if err != nil {
		return false, err
	}
	if have {
		if t.v.sharesChunks() {
			if err := noteSharedReuse(t.own()); err != nil {
				return false, err
			}
		}
		return false, noteChunkReuse(t.own())
	}
	return true, t.own().Put(ck, data)
}

// truncate sets a file's size. Growing adds a hole. Shrinking to zero starts
// a new data generation, which hides every chunk in O(1); other shrinks
// cost O(min(chunks kept, chunks dropped)).
func (t *Tx) truncate(n *inode, size uint64) error {
	const op = "truncate"
	old := n.Size
	if size == old {
		return nil
	}
	if size > old {
		if err := t.checkFileSize(op, "", size); err != nil {
			return err
		}
	}
	if err := t.charge(op, "", int64(size)-int64(old), 0); err != nil {
		return err
	}
	if size < old {
		if err := t.shrink(n, size); err != nil {
			return err
		}
	}
	n.Size = size
	return nil
}

func (t *Tx) shrink(n *inode, size uint64) error {
	keep := (size + ChunkSize - 1) / ChunkSize // chunks that stay, the last maybe partly
	had := (n.Size + ChunkSize - 1) / ChunkSize
	var tail []byte // the partial last chunk, cut at the new size
	if size%ChunkSize != 0 {
		data, err := t.chunkData(n, keep-1)
		if err != nil {
			return err
		}
		tail = data[:min(uint64(len(data)), size%ChunkSize)]
	}
	if keep < had-keep {
		// Fewer chunks stay than go: move the survivors to a new generation.
		gen, err := t.nextIno()
		if err != nil {
			return err
		}
		old := *n
		n.gen = gen
		full := keep
		if tail != nil {
			full--
		}
		for i := uint64(0); i < full; i++ {
			if _, err := t.shareChunk(&old, i, n, i); err != nil {
				return err
			}
		}
		if err := t.dropTopVersions(chunkGenPrefix(n.Ino, old.gen)); err != nil {
			return err
		}
	} else {
		for i := keep; i < had; i++ {
			if err := t.del(chunkVKey(n.Ino, n.gen, i)); err != nil {
				return err
			}
		}
	}
	if tail != nil {
		return t.putChunk(n, keep-1, tail)
	}
	return nil
}

// maxCopyBytes bounds the bytes CopyRange copies through memory in one
// call; like copy_file_range(2), it may then copy less than asked.
const maxCopyBytes = 4 << 20

// CopyRange copies up to length bytes of file src from offIn into file
// dst at offOut, as copy_file_range(2) does, and returns how many it
// copied: fewer than asked at the end of src, and at most maxCopyBytes
// where the two offsets are not both chunk-aligned. Aligned, every whole
// chunk of the range is shared rather than copied (no data is read or
// written, as CopyData does); only a partial last chunk is copied. The
// ranges of one file must not overlap (EINVAL).
func (t *Tx) CopyRange(src Ino, offIn uint64, dst Ino, offOut, length uint64) (uint64, error) {
	const op = "copy_file_range"
	if err := t.writable(op); err != nil {
		return 0, err
	}
	s, err := t.fileInode(op, src)
	if err != nil {
		return 0, err
	}
	if offIn >= s.Size || length == 0 {
		return 0, nil
	}
	n := min(length, s.Size-offIn)
	if src == dst && offIn < offOut+n && offOut < offIn+n {
		return 0, errs.E(op, "", syscall.EINVAL)
	}
	aligned := offIn%ChunkSize == 0 && offOut%ChunkSize == 0
	if !aligned {
		n = min(n, maxCopyBytes)
	}
	d, err := t.fileInode(op, dst)
	if err != nil {
		return 0, err
	}
	shared := uint64(0) // bytes of whole chunks shared
	if aligned {
		shared = n / ChunkSize * ChunkSize
		newSize := max(d.Size, offOut+shared)
		if err := t.checkFileSize(op, "", newSize); err != nil {
			return 0, err
		}
		if err := t.charge(op, "", int64(newSize-d.Size), 0); err != nil {
			return 0, err
		}
		for k := uint64(0); k < shared/ChunkSize; k++ {
			to := offOut/ChunkSize + k
			ok, err := t.shareChunk(s, offIn/ChunkSize+k, d, to)
			if err == nil && !ok { // a hole over whatever dst held there
				err = t.del(chunkVKey(d.Ino, d.gen, to))
			}
			if err != nil {
				return 0, err
			}
		}
		d.Size = newSize
		d.Mtime, d.Ctime = t.now, t.now
		if err := t.putInode(d); err != nil {
			return 0, err
		}
	}
	if rest := n - shared; rest > 0 {
		buf := make([]byte, min(rest, maxCopyBytes))
		got, err := t.Read(src, int64(offIn+shared), buf)
		if err != nil {
			return 0, err
		}
		if _, err := t.Write(dst, int64(offOut+shared), buf[:got]); err != nil {
			return 0, err
		}
		return shared + uint64(got), nil
	}
	return shared, nil
}

// shareChunk makes chunk from of s also chunk to of d, bringing the data
// into this vault's file when it lives in a parent's. A hole in s is left
// to the caller: it reports false and changes nothing.
func (t *Tx) shareChunk(s *inode, from uint64, d *inode, to uint64) (bool, error) {
	sum, segIdx, ok, err := t.chunkRef(s, from)
	if err != nil || !ok {
		return false, err
	}
	if segIdx != 0 {
		data, err := t.txs[segIdx].Get(chunkKey(sum))
		if err != nil {
			return false, corruptf("chunk %x of inode %d: %v", sum[:8], s.Ino, err)
		}
		if err := t.v.checkChunk(sum, data, s.Ino); err != nil {
			return false, err // damage of a parent's file stays there
		}
		if _, err := t.storeChunk(sum, data); err != nil {
			return false, err
		}
	}
	return true, t.put(chunkVKey(d.Ino, d.gen, to), sum)
}

// CopyData makes regular file dst hold exactly the content of src by
// sharing its chunks: O(chunks), and no data is read or written (as a
// reflink does). dst's other attributes stay.
func (t *Tx) CopyData(src, dst Ino) error {
	const op = "copy"
	if err := t.writable(op); err != nil {
		return err
	}
	s, err := t.fileInode(op, src)
	if err != nil {
		return err
	}
	d, err := t.fileInode(op, dst)
	if err != nil {
		return err
	}
	if src == dst {
		return nil
	}
	if err := t.truncate(d, 0); err != nil {
		return err
	}
	if err := t.checkFileSize(op, "", s.Size); err != nil {
		return err
	}
	if err := t.charge(op, "", int64(s.Size), 0); err != nil {
		return err
	}
	for i := uint64(0); i*ChunkSize < s.Size; i++ {
		if _, err := t.shareChunk(s, i, d, i); err != nil {
			return err
		}
	}
	d.Size = s.Size
	d.Mtime, d.Ctime = t.now, t.now
	return t.putInode(d)
}
