package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// TestSharedConformance: a store whose keys under "b" live in a shared
// table is still a kv store in every respect: scans that cross the shared
// range's bounds see both tables, in order, in one snapshot.
func TestSharedConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	var next atomic.Int64 // the cases run in parallel
	kvtest.Run(t, func(t *testing.T) kv.Engine {
		n := next.Add(1)
		db, err := postgres.Create(dsn, &postgres.Options{Table: fmt.Sprintf("s%d", n),
			Shared: &postgres.Shared{Prefix: []byte("b"), Table: fmt.Sprintf("sh%d", n)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}

// TestSharedBetweenStores: two stores naming one shared table see each
// other's keys under the prefix, in the same transactions as their own,
// and only their own elsewhere.
func TestSharedBetweenStores(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func(table string) *postgres.DB {
		db, err := postgres.Create(dsn, &postgres.Options{Table: table, Shared: &postgres.Shared{Prefix: []byte("C"), Table: "chunks"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open("a"), open("b")
	if got := a.Capabilities().SharedPrefix; string(got) != "C" {
		t.Fatalf("SharedPrefix = %q", got)
	}
	if err := a.Update(func(tx kv.Tx) error {
		for _, k := range []string{"A1", "C1", "D1"} {
			if err := tx.Put([]byte(k), []byte("a")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := b.Update(func(tx kv.Tx) error {
		if err := tx.Put([]byte("C2"), []byte("b")); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := b.Update(func(tx kv.Tx) error { return tx.Put([]byte("B2"), []byte("b")) }); err != nil {
		t.Fatal(err)
	}
	scan := func(db *postgres.DB, start, end string) string {
		var got []string
		var e []byte
		if end != "" {
			e = []byte(end)
		}
		if err := db.View(func(tx kv.Tx) error {
			return tx.Scan([]byte(start), e, func(k, v []byte) (bool, error) {
				got = append(got, string(k)+"="+string(v))
				return true, nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	for _, c := range []struct {
		db         *postgres.DB
		start, end string
		want       string
	}{
		{a, "", "", "A1=a C1=a D1=a"},
		{b, "", "", "B2=b C1=a"}, // b's rolled-back C2 is nowhere
		{b, "C", "D", "C1=a"},
		{a, "B", "C2", "C1=a"},
		{a, "C1\x00", "", "D1=a"},
		{b, "A", "C", "B2=b"},
	} {
		if got := scan(c.db, c.start, c.end); got != c.want {
			t.Errorf("scan [%q, %q) = %q, want %q", c.start, c.end, got, c.want)
		}
	}
	if err := b.View(func(tx kv.Tx) error {
		if _, err := tx.Get([]byte("A1")); !errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("b sees a's own key: %v", err)
		}
		v, err := tx.Get([]byte("C1"))
		if err != nil || string(v) != "a" {
			return fmt.Errorf("b's Get of the shared C1 = %q, %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Drop(dsn, &postgres.Options{Table: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := scan(b, "", ""); got != "B2=b C1=a" {
		t.Errorf("after a was dropped, b scans %q: the shared table must stay", got)
	}
}

// TestSharedConcurrentSameKey: the writers of two stores storing the same
// new shared key at once, in batches (a mount's, which cannot be run
// again), both commit: they queue on the space's lock instead of failing
// each other's serializable transactions.
func TestSharedConcurrentSameKey(t *testing.T) {
	dsn := pgtest.DSN(t)
	var dbs []*postgres.DB
	for _, table := range []string{"a", "b", "c", "d"} {
		db, err := postgres.Create(dsn, &postgres.Options{Table: table, Shared: &postgres.Shared{Prefix: []byte("C"), Table: "chunks"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	for round := range 20 {
		key := []byte(fmt.Sprintf("C%02d", round))
		errc := make(chan error, len(dbs))
		for _, db := range dbs {
			go func() {
				b, err := db.Batch()
				if err != nil {
					errc <- err
					return
				}
				err = b.Step(func(tx kv.Tx) error {
					if _, err := tx.Get(key); err != nil && !errors.Is(err, kv.ErrNotFound) {
						return err
					}
					if err := tx.Put(key, []byte("same")); err != nil {
						return err
					}
					return tx.Put([]byte("own"), key)
				})
				if err != nil {
					_ = b.Rollback()
					errc <- err
					return
				}
				errc <- b.Commit()
			}()
		}
		for range dbs {
			if err := <-errc; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
