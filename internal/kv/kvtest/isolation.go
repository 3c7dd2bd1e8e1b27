package kvtest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
)

func testSnapshotIsolation(t *testing.T, e kv.Engine) {
	put(t, e, "a", "old", "b", "old")
	started, committed := make(chan struct{}), make(chan error)
	go func() {
		<-started
		committed <- e.Update(func(tx kv.Tx) error {
			if err := tx.Put(b("a"), b("new")); err != nil {
				return err
			}
			if err := tx.Put(b("c"), b("new")); err != nil {
				return err
			}
			return tx.Delete(b("b"))
		})
	}()
	must(t, e.View(func(tx kv.Tx) error {
		// Nothing read yet: the snapshot starts with the View, not with
		// its first read.
		close(started)
		must(t, <-committed)
		equal(t, "snapshot", scan(t, tx, nil, nil), []string{"a=old", "b=old"})
		v, err := tx.Get(b("a"))
		if err != nil || string(v) != "old" {
			t.Errorf("Get(a) in old snapshot = %q, %v", v, err)
		}
		return nil
	}))
	equal(t, "after", scanAll(t, e, nil, nil), []string{"a=new", "c=new"})
}

func testConcurrentWriters(t *testing.T, e kv.Engine) {
	const writers, increments = 8, 25
	counter := b("counter")
	incr := func(tx kv.Tx) error {
		n := 0
		v, err := tx.Get(counter)
		switch {
		case err == nil:
			if n, err = parseInt(v); err != nil {
				return err
			}
		case err != kv.ErrNotFound:
			return err
		}
		return tx.Put(counter, fmt.Appendf(nil, "%d", n+1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for range writers {
		wg.Go(func() {
			for range increments {
				if err := e.Update(incr); err != nil {
					errs <- err
					return
				}
			}
		})
		// Readers alongside must never see a torn or decreasing counter.
		wg.Go(func() {
			last := 0
			for range increments {
				err := e.View(func(tx kv.Tx) error {
					v, err := tx.Get(counter)
					if err == kv.ErrNotFound {
						return nil
					} else if err != nil {
						return err
					}
					n, err := parseInt(v)
					if err == nil && n < last {
						err = fmt.Errorf("counter went back from %d to %d", last, n)
					}
					last = n
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantValue(t, e, "counter", fmt.Sprint(writers*increments))
}

func parseInt(v []byte) (int, error) {
	var n int
	_, err := fmt.Sscanf(string(v), "%d", &n)
	return n, err
}
