package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// TestCloseReleasesLease: closing an engine gives its leases back at
// once; its pool lives on for the next engine, and a heartbeat through it
// must not keep a lease of a closed engine alive.
func TestCloseReleasesLease(t *testing.T) {
	_, dsn := newDB(t)
	create1(t, dsn)
	a, err := postgres.Open(dsn, nil)
	must(t, err)
	if _, err := a.Lease(context.Background(), "host-a", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	must(t, a.Close())
	b, err := postgres.Open(dsn, nil)
	must(t, err)
	defer b.Close()
	l, err := b.Lease(context.Background(), "host-b", 2, time.Hour)
	if err != nil {
		t.Fatalf("lease after its holder's engine closed: %v", err)
	}
	must(t, l.Release())
}

// TestPoolsAreReused: engines opened one after another on one address
// reuse the connections of those closed before, instead of dialling.
func TestPoolsAreReused(t *testing.T) {
	db, dsn := newDB(t)
	create1(t, dsn)
	s := pgtest.Get(t)
	sessions := func() int {
		time.Sleep(300 * time.Millisecond) // ended sessions reach the statistics
		return count(t, s, db, "SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
	}
	before := sessions()
	for range 8 {
		e, err := postgres.Open(dsn, nil)
		must(t, err)
		must(t, e.View(func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return err }))
		must(t, e.Close())
	}
	// The count's own session is one.
	if n := sessions() - before; n > 2 {
		t.Fatalf("%d sessions began and ended for 8 engines opened and closed in turn, want them to share one pool", n)
	}
}
