package kvtest

import (
	"errors"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// testBatch checks kv.Batcher on engines that have it: a failed step is
// undone alone, reads see uncommitted steps, other readers do not, and
// Commit and Rollback keep or drop everything.
func testBatch(t *testing.T, e kv.Engine) {
	bt, ok := e.(kv.Batcher)
	if !ok {
		t.Skipf("%s has no batches", e.Name())
	}
	put(t, e, "base", "0")
	b, err := bt.Batch()
	if errors.Is(err, kv.ErrNoBatch) {
		t.Skipf("%s has no batches", e.Name())
	}
	must(t, err)
	must(t, b.Step(func(tx kv.Tx) error { return tx.Put([]byte("a"), []byte("1")) }))
	boom := errors.New("boom")
	if err := b.Step(func(tx kv.Tx) error {
		must(t, tx.Put([]byte("b"), []byte("2")))
		must(t, tx.Delete([]byte("a")))
		return boom
	}); err != boom {
		t.Fatalf("failed step returned %v, want its own error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = b.Step(func(tx kv.Tx) error {
			must(t, tx.Put([]byte("c"), []byte("3")))
			panic("step panics")
		})
	}()
	must(t, b.Read(func(tx kv.Tx) error {
		equal(t, "inside the batch", scan(t, tx, nil, nil), []string{"a=1", "base=0"})
		if err := tx.Put([]byte("x"), nil); !errors.Is(err, kv.ErrReadOnly) {
			t.Errorf("Put in Read: %v, want ErrReadOnly", err)
		}
		return nil
	}))
	equal(t, "outside before commit", scanAll(t, e, nil, nil), []string{"base=0"})
	must(t, b.Commit())
	equal(t, "after commit", scanAll(t, e, nil, nil), []string{"a=1", "base=0"})
	if err := b.Step(func(kv.Tx) error { return nil }); err == nil {
		t.Error("Step after Commit succeeded")
	}

	b, err = bt.Batch()
	must(t, err)
	must(t, b.Step(func(tx kv.Tx) error { return tx.Put([]byte("gone"), []byte("1")) }))
	must(t, b.Rollback())
	equal(t, "after rollback", scanAll(t, e, nil, nil), []string{"a=1", "base=0"})
	put(t, e, "after", "1") // the write lock was given back
}
