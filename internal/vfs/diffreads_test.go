package vfs_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// chunkCounter is a real engine whose transactions count the chunk
// data they fetch, by hash.
type chunkCounter struct {
	kv.Engine
	mu      sync.Mutex
	fetched map[[sha256.Size]byte]int
}

func (e *chunkCounter) View(fn func(kv.Tx) error) error {
	return e.Engine.View(func(t kv.Tx) error { return fn(chunkCountTx{t, e}) })
}

func (e *chunkCounter) Update(fn func(kv.Tx) error) error {
	return e.Engine.Update(func(t kv.Tx) error { return fn(chunkCountTx{t, e}) })
}

func (e *chunkCounter) reset() {
	e.mu.Lock()
	e.fetched = map[[sha256.Size]byte]int{}
	e.mu.Unlock()
}

type chunkCountTx struct {
	kv.Tx
	e *chunkCounter
}

func (t chunkCountTx) Get(key []byte) ([]byte, error) {
	if len(key) == 1+sha256.Size && key[0] == vfs.ChunkKeyPrefix {
		t.e.mu.Lock()
		if t.e.fetched != nil {
			t.e.fetched[[sha256.Size]byte(key[1:])]++
		}
		t.e.mu.Unlock()
	}
	return t.Tx.Get(key)
}

// Diff, renames and patches of a few changes among many files fetch no
// chunk of an unchanged file, none of a file renamed with its content,
// and each chunk of a changed file once, however many sides hold it.
func TestDiffReadsOnlyChangedChunks(t *testing.T) {
	sq, err := engines.Create(filepath.Join(t.TempDir(), "v.db"), "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	eng := &chunkCounter{Engine: sq}
	v, err := vfs.Create(eng, "reads", vfs.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkFsck(t, v)
		v.Close()
	})
	// 300 small files, and one of five chunks, every chunk its own lines.
	big := func(edit string) []byte {
		var b bytes.Buffer
		for c := range 5 {
			for b.Len() < (c+1)*vfs.ChunkSize-40 {
				fmt.Fprintf(&b, "chunk %d line %d\n", c, b.Len())
			}
			if c == 2 {
				b.WriteString(edit)
			}
			b.WriteString(strings.Repeat("-", (c+1)*vfs.ChunkSize-b.Len()-1) + "\n")
		}
		return b.Bytes()
	}
	err = v.Update(func(tx *vfs.Tx) error {
		if _, err := tx.MkdirAll("/src", 0o755); err != nil {
			return err
		}
		for i := range 300 {
			if _, err := tx.WriteFile(fmt.Sprintf("/src/f%03d.txt", i), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
				return err
			}
		}
		_, err := tx.WriteFile("/big.txt", big("a"), 0o644)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.SaveCheckpoint("base", ""); err != nil {
		t.Fatal(err)
	}
	err = v.Update(func(tx *vfs.Tx) error {
		if _, err := tx.WriteFile("/src/f007.txt", []byte("file 7, edited\n"), 0o644); err != nil {
			return err
		}
		if _, err := tx.WriteFile("/big.txt", big("b"), 0o644); err != nil {
			return err
		}
		d, err := tx.Resolve("/src", false)
		if err != nil {
			return err
		}
		return tx.Rename(d.Ino, "f008.txt", d.Ino, "moved.txt", 0)
	})
	if err != nil {
		t.Fatal(err)
	}

	eng.reset()
	from, to := vfs.StateRef{Vault: v, Checkpoint: "base"}, vfs.StateRef{Vault: v}
	changes, err := vfs.Diff(from, to)
	if err == nil {
		changes, err = vfs.FindRenames(from, to, changes)
	}
	var patches []vfs.FilePatch
	if err == nil {
		patches, err = vfs.Patches(from, to, changes)
	}
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range changes {
		kinds = append(kinds, string(c.Kind)+" "+c.Path)
	}
	if got := strings.Join(kinds, ", "); got != "modified /big.txt, modified /src/f007.txt, renamed /src/moved.txt" {
		t.Fatalf("changes: %s", got)
	}
	if !strings.Contains(patches[0].Text, "-a") || !strings.Contains(patches[0].Text, "+b") {
		t.Errorf("big.txt's patch:\n%s", patches[0].Text)
	}
	want := map[[sha256.Size]byte]int{
		sha256.Sum256([]byte("file 7\n")):         1,
		sha256.Sum256([]byte("file 7, edited\n")): 1,
	}
	for _, content := range [][]byte{big("a"), big("b")} {
		for c := 0; c < len(content); c += vfs.ChunkSize {
			want[sha256.Sum256(content[c:c+vfs.ChunkSize])] = 1
		}
	}
	if len(want) != 2+6 {
		t.Fatalf("the big file's versions share %d chunks, want 4", 12-len(want))
	}
	for sum, n := range eng.fetched {
		if want[sum] == 0 {
			t.Errorf("chunk %x fetched %d times: not a chunk of a changed file", sum[:6], n)
		} else if n != 1 {
			t.Errorf("chunk %x fetched %d times, want once", sum[:6], n)
		}
	}
	for sum := range want {
		if eng.fetched[sum] == 0 {
			t.Errorf("chunk %x of a changed file never fetched", sum[:6])
		}
	}
}
