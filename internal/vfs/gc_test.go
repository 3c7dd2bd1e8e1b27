package vfs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestGCKeepsChunksWrittenDuringIt stores again, between a collection's
// mark and its sweep, a chunk the mark found dead: the collection must
// leave it, and fsck must find every mapped chunk.
func TestGCKeepsChunksWrittenDuringIt(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		x := string(bytes.Repeat([]byte("x"), 100_000))
		f.write("/a", x)
		f.write("/a", "overwritten") // x's chunks are garbage now
		raced := false
		defer vfs.SetGCAfterMark(func() {
			if !raced {
				raced = true
				f.write("/b", x) // finds them stored and maps them again
			}
		})()
		if _, err := f.v.GC(); err != nil {
			t.Fatal(err)
		}
		if !raced {
			t.Fatal("the collection never reached its sweep")
		}
		if got := f.read("/b"); got != x {
			t.Fatalf("/b reads %d bytes, want %d", len(got), len(x))
		}
		checkFsck(t, f.v)
		// The next collection, with nothing in its way, frees nothing
		// that is mapped.
		if _, err := f.v.GC(); err != nil {
			t.Fatal(err)
		}
		if got := f.read("/b"); got != x {
			t.Fatalf("/b after a second gc: %d bytes", len(got))
		}
	})
}

// TestGCFreesInSteps checks that a collection frees every dead chunk,
// more than one sweep step of them, and keeps what checkpoints hold.
func TestGCFreesInSteps(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/keep", "kept by a checkpoint")
		if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/keep", "changed after it")
		f.update(func(tx *vfs.Tx) error {
			for i := range 600 {
				if _, err := tx.WriteFile(fmt.Sprintf("/f%d", i), []byte(fmt.Sprint("content ", i)), 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		f.update(func(tx *vfs.Tx) error {
			for i := range 600 {
				if err := tx.Unlink(vfs.RootIno, fmt.Sprintf("f%d", i)); err != nil {
					return err
				}
			}
			return nil
		})
		st, err := f.v.GC()
		if err != nil {
			t.Fatal(err)
		}
		if st.ChunksFreed != 600 || st.ChunksKept != 2 {
			t.Fatalf("gc = %+v, want 600 freed and 2 kept", st)
		}
		if got := readIn(t, f.v, "cp", "/keep"); got != "kept by a checkpoint" {
			t.Fatalf("checkpoint reads %q", got)
		}
	})
}

// vaultSize is the size of a vault's files on disk (a SQLite log
// included).
func vaultSize(t *testing.T, path string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestOverwriteLoopStaysBounded rewrites random ranges of a 4 MiB file,
// collecting automatically after each change as the CLI does, and
// requires the file to stay within twice what the working state and a
// checkpoint hold, plus 64 MiB; without collection it grows by every
// chunk written (more than 150 MiB here).
func TestOverwriteLoopStaysBounded(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			f := newVault(t, engine)
			path := f.home.Path("test")
			const size = 4 << 20
			rng := rand.New(rand.NewPCG(1, 2))
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			f.write("/big", string(data))
			if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
				t.Fatal(err)
			}
			held := append([]byte(nil), data...)
			bound := int64(2*(size+size)) + 64<<20
			var peak int64
			runs := 0
			for i := range 120 {
				f.update(func(tx *vfs.Tx) error {
					at, err := tx.Resolve("/big", true)
					if err != nil {
						return err
					}
					for range 4 {
						n := 64<<10 + rng.IntN(256<<10)
						off := rng.IntN(size - n)
						buf := data[off : off+n]
						for j := range buf {
							buf[j] = byte(rng.Uint32())
						}
						if _, err := tx.Write(at.Ino, int64(off), buf); err != nil {
							return err
						}
					}
					return nil
				})
				_, ran, err := f.v.AutoGC()
				if err != nil {
					t.Fatalf("change %d: %v", i, err)
				}
				if ran {
					runs++
				}
				peak = max(peak, vaultSize(t, path))
			}
			t.Logf("%s: %d collections, peak file %d MiB, bound %d MiB", engine, runs, peak>>20, bound>>20)
			if peak > bound {
				t.Errorf("file reached %d MiB, bound %d MiB", peak>>20, bound>>20)
			}
			if got := f.read("/big"); got != string(data) {
				t.Fatal("the working state does not read what was written")
			}
			if got := readIn(t, f.v, "cp", "/big"); got != string(held) {
				t.Fatal("the checkpoint does not read what it held")
			}
		})
	}
}

// TestSpaceReport checks who the report says needs each chunk: the
// working state, only a checkpoint, or nobody.
func TestSpaceReport(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		rng := rand.New(rand.NewPCG(5, 6))
		random := func(n int) string {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return string(b)
		}
		a, b, c, d := random(100_000), random(70_000), random(30_000), random(5_000)
		f.write("/a", a)
		if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/a", b)
		f.write("/c", c)
		f.write("/c", d)
		zero := uint64(0)
		f.update(func(tx *vfs.Tx) error {
			_, err := tx.SetAttr(mustIno(t, tx, "/a"), vfs.SetAttr{Size: &zero})
			return err
		})
		f.write("/a", b) // a new generation, mapping the chunks of b again
		sp, err := f.v.Space()
		if err != nil {
			t.Fatal(err)
		}
		want := vfs.SpaceReport{LiveBytes: int64(len(b) + len(d)), CheckpointBytes: int64(len(a)),
			GarbageBytes: int64(len(c)), FreeBytes: sp.FreeBytes, FileBytes: sp.FileBytes}
		if sp != want {
			t.Fatalf("space = %+v, want %+v", sp, want)
		}
		if engine != "mem" && sp.FileBytes == 0 {
			t.Fatal("no file size")
		}
		if _, err := f.v.GC(); err != nil {
			t.Fatal(err)
		}
		if sp, err = f.v.Space(); err != nil || sp.GarbageBytes != 0 || sp.CheckpointBytes != int64(len(a)) {
			t.Fatalf("after gc: %+v, %v", sp, err)
		}
	})
}

func mustIno(t *testing.T, tx *vfs.Tx, p string) vfs.Ino {
	t.Helper()
	at, err := tx.Resolve(p, true)
	if err != nil {
		t.Fatal(err)
	}
	return at.Ino
}

// TestCompactLetsGoOfHiddenChunks checks that merging a deleted
// checkpoint's layer into the working state does not carry over chunk
// maps the working state cannot see (a file rewritten since, a file
// removed since), which would keep their chunks from collection forever.
func TestCompactLetsGoOfHiddenChunks(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/rewritten", "old content")
		f.write("/removed", "removed content")
		f.update(func(tx *vfs.Tx) error {
			return tx.SetXattr(mustIno(t, tx, "/removed"), "user.k", []byte("v"), 0)
		})
		if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/rewritten", "new content")
		f.update(func(tx *vfs.Tx) error { return tx.Unlink(vfs.RootIno, "removed") })
		if err := f.v.DeleteCheckpoint("cp"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.v.Compact(); err != nil {
			t.Fatal(err)
		}
		st, err := f.v.GC()
		if err != nil {
			t.Fatal(err)
		}
		if st.ChunksFreed != 2 || st.ChunksKept != 1 {
			t.Fatalf("gc after compact = %+v, want 2 freed, 1 kept", st)
		}
		sp, err := f.v.Space()
		if err != nil {
			t.Fatal(err)
		}
		if sp.CheckpointBytes != 0 || sp.GarbageBytes != 0 || sp.LiveBytes != int64(len("new content")) {
			t.Fatalf("space after compact and gc: %+v", sp)
		}
		if got := f.read("/rewritten"); got != "new content" {
			t.Fatalf("/rewritten reads %q", got)
		}
	})
}

// TestGCMarksOlderVaults checks that a vault made before writes told
// collections about reused chunks gets the format feature that keeps the
// builds of then from writing to it, once it is collected.
func TestGCMarksOlderVaults(t *testing.T) {
	f := newVault(t, "sqlite")
	old := f.v.Header()
	old.Features = slices.DeleteFunc(slices.Clone(old.Features), func(s string) bool { return s == "gc-marker" })
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.v.Engine().Update(func(tx kv.Tx) error { return tx.Put([]byte("\x00avfs"), b) }); err != nil {
		t.Fatal(err)
	}
	features := func() []string {
		var h vfs.Header
		err := f.v.Engine().View(func(tx kv.Tx) error {
			b, err := tx.Get([]byte("\x00avfs"))
			if err == nil {
				err = json.Unmarshal(b, &h)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return h.Features
	}
	if slices.Contains(features(), "gc-marker") {
		t.Fatal("the old header still has the feature")
	}
	if _, err := f.v.GC(); err != nil {
		t.Fatal(err)
	}
	if got := features(); !slices.Contains(got, "gc-marker") {
		t.Fatalf("features after gc: %q", got)
	}
}

// crashAt is an engine whose write transactions after the first n are
// lost as in a crash just before their commit: each runs, then rolls
// back.
type crashAt struct {
	kv.Engine
	n int
}

var errCrash = errors.New("crash before commit")

func (c *crashAt) Update(fn func(kv.Tx) error) error {
	if c.n == 0 {
		return c.Engine.Update(func(tx kv.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errCrash
		})
	}
	c.n--
	return c.Engine.Update(fn)
}

// TestGCStoppedAtEveryStep stops a collection at each of its
// transactions in turn, as a crash there would: every time, the vault
// passes fsck and reads the same, and the next collection frees all the
// garbage (of deleted files and of an abandoned working state).
func TestGCStoppedAtEveryStep(t *testing.T) {
	for n := 0; ; n++ {
		f := newVault(t, "sqlite")
		f.write("/held", "held by a checkpoint")
		if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/held", "live")
		f.update(func(tx *vfs.Tx) error {
			for i := range 600 {
				if _, err := tx.WriteFile(fmt.Sprintf("/g%d", i), fmt.Appendf(nil, "garbage %d", i), 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		f.update(func(tx *vfs.Tx) error {
			for i := range 600 {
				if err := tx.Unlink(vfs.RootIno, fmt.Sprintf("g%d", i)); err != nil {
					return err
				}
			}
			return nil
		})
		// And a working state a restore abandons.
		if _, err := f.v.SaveCheckpoint("before", ""); err != nil {
			t.Fatal(err)
		}
		f.write("/abandoned", "written, then restored away")
		if err := f.v.RestoreCheckpoint("before"); err != nil {
			t.Fatal(err)
		}
		crashing, err := vfs.Open(&crashAt{Engine: f.v.Engine(), n: n}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = crashing.GC()
		stopped := errors.Is(err, errCrash)
		if err != nil && !stopped {
			t.Fatalf("stopped after %d transactions: %v", n, err)
		}
		checkFsck(t, f.v)
		if got := f.read("/held"); got != "live" {
			t.Fatalf("stopped after %d transactions: /held reads %q", n, got)
		}
		if got := readIn(t, f.v, "cp", "/held"); got != "held by a checkpoint" {
			t.Fatalf("stopped after %d transactions: the checkpoint reads %q", n, got)
		}
		if _, err := f.v.GC(); err != nil {
			t.Fatal(err)
		}
		sp, err := f.v.Space()
		if err != nil {
			t.Fatal(err)
		}
		if sp.GarbageBytes != 0 {
			t.Fatalf("stopped after %d transactions, then collected: %d bytes of garbage left", n, sp.GarbageBytes)
		}
		if !stopped {
			t.Logf("a collection of 601 chunks and a layer is %d transactions", n)
			return
		}
		if n > 20 {
			t.Fatal("a collection of 600 chunks took more than 20 transactions")
		}
	}
}

// TestGCInAParentKeepsItsForks rewrites, in a parent, the files a fork
// reads from it, collects and compacts the parent, and checks that the
// fork still reads them (the parent's pinned layer names their chunks),
// that the fork's own copies live in its own file, and that both files
// pass fsck.
func TestGCInAParentKeepsItsForks(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			f := newVault(t, engine)
			rng := rand.New(rand.NewPCG(7, 8))
			orig := make([]byte, 3*vfs.ChunkSize)
			for i := range orig {
				orig[i] = byte(rng.Uint32())
			}
			f.write("/read-by-fork", string(orig))
			f.write("/copied-by-fork", string(orig[:vfs.ChunkSize]))
			fork, err := f.home.Fork("test", "task")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fork.Close() })
			t.Cleanup(func() { checkFsck(t, fork) })
			ff := &fixture{t: t, home: f.home, v: fork}
			ff.update(func(tx *vfs.Tx) error {
				src := mustIno(t, tx, "/copied-by-fork")
				at, err := tx.WriteFile("/copy", nil, 0o644)
				if err != nil {
					return err
				}
				return tx.CopyData(src, at.Ino)
			})
			f.write("/read-by-fork", "rewritten in the parent")
			f.write("/copied-by-fork", "rewritten too")
			if _, err := f.v.GC(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.home.Compact("test"); err != nil {
				t.Fatal(err)
			}
			if got := ff.read("/read-by-fork"); got != string(orig) {
				t.Fatalf("the fork reads %d bytes of its parent's old file", len(got))
			}
			if got := ff.read("/copy"); got != string(orig[:vfs.ChunkSize]) {
				t.Fatalf("the fork's copy reads %d bytes", len(got))
			}
			sp, err := fork.Space()
			if err != nil {
				t.Fatal(err)
			}
			if sp.LiveBytes != vfs.ChunkSize {
				t.Fatalf("the fork's file holds %d live bytes, want its one copied chunk", sp.LiveBytes)
			}
		})
	}
}

// TestGCDropsAbandonedStates restores a checkpoint, which abandons the
// working state with a file written since, and checks that a collection
// frees that file's chunks without a compaction, in steps, and that fsck
// finds the vault whole.
func TestGCDropsAbandonedStates(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/kept", "in the checkpoint")
		if _, err := f.v.SaveCheckpoint("cp", ""); err != nil {
			t.Fatal(err)
		}
		f.update(func(tx *vfs.Tx) error {
			for i := range 1500 { // more records than one drop step
				if _, err := tx.WriteFile(fmt.Sprintf("/new%d", i), fmt.Appendf(nil, "abandoned %d", i), 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		if err := f.v.RestoreCheckpoint("cp"); err != nil {
			t.Fatal(err)
		}
		st, err := f.v.GC()
		if err != nil {
			t.Fatal(err)
		}
		if st.LayersDropped != 1 || st.ChunksFreed != 1500 || st.ChunksKept != 1 {
			t.Fatalf("gc after a restore = %+v, want 1 layer dropped, 1500 chunks freed, 1 kept", st)
		}
		if got := f.read("/kept"); got != "in the checkpoint" {
			t.Fatalf("/kept reads %q", got)
		}
		if got := f.read("/new1"); got != "<missing>" {
			t.Fatalf("/new1 reads %q", got)
		}
	})
}
