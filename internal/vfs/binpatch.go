package vfs

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// gitBlobID is the object name git gives content: the SHA-1 of
// "blob SIZE\0" and the bytes. `git apply` checks a binary patch's
// preimage against it, so a binary patch needs the full index line.
func gitBlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// writeBinaryPatch writes git's "GIT binary patch": the new content whole
// (literal), then the old one for the reverse, each deflated and in git's
// base85 lines.
func writeBinaryPatch(w *strings.Builder, a, b []byte) {
	w.WriteString("GIT binary patch\n")
	writeLiteral(w, b)
	writeLiteral(w, a)
}

func writeLiteral(w *strings.Builder, data []byte) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(data)
	zw.Close()
	fmt.Fprintf(w, "literal %d\n", len(data))
	deflated := z.Bytes()
	for len(deflated) > 0 {
		n := min(52, len(deflated))
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		encode85(w, deflated[:n])
		w.WriteByte('\n')
		deflated = deflated[n:]
	}
	w.WriteByte('\n')
}

const base85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 is git's base85 (base85.c): big-endian groups of four bytes,
// the last one padded with zeros, each as five digits.
func encode85(w *strings.Builder, data []byte) {
	for len(data) > 0 {
		var acc uint32
		for i := range 4 {
			acc <<= 8
			if i < len(data) {
				acc |= uint32(data[i])
			}
		}
		var digits [5]byte
		for i := 4; i >= 0; i-- {
			digits[i] = base85[acc%85]
			acc /= 85
		}
		w.Write(digits[:])
		data = data[min(4, len(data)):]
	}
}
