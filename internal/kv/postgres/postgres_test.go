package postgres_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func create(t *testing.T) *postgres.DB {
	t.Helper()
	db, err := postgres.Create(pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Engine { return create(t) })
}

// TestWaitGone: pgtest.WaitGone waits while a session named by Tag is
// open, and returns once it has ended.
func TestWaitGone(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pgtest.Tag(dsn, "avfs-wait-gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pgtest.WaitGone(dsn, "avfs-wait-gone", 100*time.Millisecond); err == nil {
		t.Fatal("WaitGone returned while the session was open")
	}
	c.Close(ctx)
	if err := pgtest.WaitGone(dsn, "avfs-wait-gone", 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
