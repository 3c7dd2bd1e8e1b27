package kv_test

// Benchmarks of every engine through the kv interface:
//
//	go test -run '^$' -bench . ./internal/kv/
//
// "sqlite-normal" is the SQLite engine with synchronous=NORMAL, for
// comparison only: avfs always runs with FULL.

import (
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/bolt"
	"github.com/agentvfs/agentvfs/internal/kv/mem"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

const benchKeys = 100_000

var benchEngines = []struct {
	name string
	open func(b *testing.B) kv.Engine
}{
	{"mem", func(b *testing.B) kv.Engine { return mem.New() }},
	{"sqlite", func(b *testing.B) kv.Engine {
		return must(sqlite.Create(filepath.Join(b.TempDir(), "v"), nil))(b)
	}},
	{"sqlite-normal", func(b *testing.B) kv.Engine {
		return must(sqlite.Create(filepath.Join(b.TempDir(), "v"), &sqlite.Options{Synchronous: "NORMAL"}))(b)
	}},
	{"bolt", func(b *testing.B) kv.Engine {
		return must(bolt.Create(filepath.Join(b.TempDir(), "v"), nil))(b)
	}},
}

func must[E kv.Engine](e E, err error) func(b *testing.B) kv.Engine {
	return func(b *testing.B) kv.Engine {
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
}

func benchKey(i int) []byte {
	k := make([]byte, 16)
	copy(k, "inode/")
	binary.BigEndian.PutUint64(k[8:], uint64(i))
	return k
}

var benchValue = make([]byte, 100)

// forEachEngine runs body on every engine, each filled with benchKeys
// 100-byte values.
func forEachEngine(b *testing.B, body func(b *testing.B, e kv.Engine)) {
	for _, be := range benchEngines {
		b.Run(be.name, func(b *testing.B) {
			e := be.open(b)
			defer e.Close()
			err := e.Update(func(tx kv.Tx) error {
				for i := range benchKeys {
					if err := tx.Put(benchKey(i), benchValue); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			body(b, e)
		})
	}
}

// BenchmarkGet is one random Get inside a long-lived View.
func BenchmarkGet(b *testing.B) {
	forEachEngine(b, func(b *testing.B, e kv.Engine) {
		r := rand.New(rand.NewPCG(1, 2))
		err := e.View(func(tx kv.Tx) error {
			for b.Loop() {
				if _, err := tx.Get(benchKey(r.IntN(benchKeys))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkViewGet is a whole View around one random Get: the cost of a
// read transaction.
func BenchmarkViewGet(b *testing.B) {
	forEachEngine(b, func(b *testing.B, e kv.Engine) {
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			err := e.View(func(tx kv.Tx) error {
				_, err := tx.Get(benchKey(r.IntN(benchKeys)))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPutCommit is one small Put committed on its own: dominated by
// the durable commit (fsync).
func BenchmarkPutCommit(b *testing.B) {
	forEachEngine(b, func(b *testing.B, e kv.Engine) {
		i := benchKeys
		for b.Loop() {
			err := e.Update(func(tx kv.Tx) error { return tx.Put(benchKey(i), benchValue) })
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkPutBatch1000 is 1,000 random overwrites in one transaction.
func BenchmarkPutBatch1000(b *testing.B) {
	forEachEngine(b, func(b *testing.B, e kv.Engine) {
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			err := e.Update(func(tx kv.Tx) error {
				for range 1000 {
					if err := tx.Put(benchKey(r.IntN(benchKeys)), benchValue); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScan1000 reads 1,000 consecutive pairs from a random start.
func BenchmarkScan1000(b *testing.B) {
	forEachEngine(b, func(b *testing.B, e kv.Engine) {
		r := rand.New(rand.NewPCG(1, 2))
		err := e.View(func(tx kv.Tx) error {
			for b.Loop() {
				start := r.IntN(benchKeys - 1000)
				n := 0
				err := tx.Scan(benchKey(start), benchKey(start+1000), func(k, v []byte) (bool, error) {
					n++
					return true, nil
				})
				if err != nil {
					return err
				}
				if n != 1000 {
					b.Fatalf("scanned %d pairs", n)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}
