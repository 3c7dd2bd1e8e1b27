package postgres_test

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// newDB creates an empty database and returns its name and DSN.
func newDB(t *testing.T) (string, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/"), dsn
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want an error wrapping %v", what, err, want)
	}
	// What the JSON contract prints for it.
	kinds := map[error]errs.Kind{kv.ErrUnavailable: errs.StoreUnavailable, kv.ErrNewerFormat: errs.UnsupportedFormat,
		kv.ErrForeign: errs.CorruptVault, kv.ErrCorrupt: errs.CorruptVault, kv.ErrBusy: errs.VaultLocked}
	if k, ok := kinds[want]; ok && errs.KindOf(err) != k {
		t.Errorf("%s: kind %s, want %s", what, errs.KindOf(err), k)
	}
}

// TestBadStores opens stores that are not there or not ours: each is a
// distinct kv error, and nothing is written to a database not avfs's.
func TestBadStores(t *testing.T) {
	s := pgtest.Get(t)
	t.Run("unreachable", func(t *testing.T) {
		start := time.Now()
		_, err := postgres.Open("postgres://postgres@/x?host="+url.QueryEscape(t.TempDir()), &postgres.Options{ConnTimeout: 2 * time.Second})
		wantErr(t, "no server on the socket", err, kv.ErrUnavailable)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v to say so", d)
		}
	})
	t.Run("unparsable", func(t *testing.T) {
		_, err := postgres.Open("postgres://u:topsecret@[::1/x", nil)
		wantErr(t, "a DSN that does not parse", err, kv.ErrUnavailable)
		if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("the password is printed: %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		db, _ := newDB(t)
		_, err := postgres.Open(s.PasswordDSN(db, "wrong-"+pgtest.Password), nil)
		wantErr(t, "a wrong password", err, kv.ErrUnavailable)
		if strings.Contains(err.Error(), pgtest.Password) {
			t.Errorf("the password is printed: %v", err)
		}
		// The right one works, so the failure above was the password's.
		e, err := postgres.Create(s.PasswordDSN(db, pgtest.Password), nil)
		if err != nil {
			t.Fatalf("right password: %v", err)
		}
		if strings.Contains(e.Path(), pgtest.Password) {
			t.Errorf("Path() holds the password: %s", e.Path())
		}
		e.Close()
	})
	t.Run("no such database", func(t *testing.T) {
		_, err := postgres.Open(s.DSN("nosuchdb"), nil)
		wantErr(t, "a database that does not exist", err, kv.ErrUnavailable)
	})
	t.Run("empty database", func(t *testing.T) {
		_, dsn := newDB(t)
		_, err := postgres.Open(dsn, nil)
		wantErr(t, "Open of an empty database", err, fs.ErrNotExist)
	})
	t.Run("another program's", func(t *testing.T) {
		db, dsn := newDB(t)
		must(t, s.Exec(db, "CREATE TABLE users (id int PRIMARY KEY)"))
		_, err := postgres.Create(dsn, nil)
		wantErr(t, "Create in another program's database", err, kv.ErrForeign)
		_, err = postgres.Open(dsn, nil)
		wantErr(t, "Open of another program's database", err, kv.ErrForeign)
		if n := count(t, s, db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"); n != 1 {
			t.Errorf("%d tables after the refusals, want the program's 1", n)
		}
	})
	t.Run("another application's meta", func(t *testing.T) {
		db, dsn := newDB(t)
		create1(t, dsn)
		must(t, s.Exec(db, "UPDATE avfs_meta SET value = 'other' WHERE key = 'application'"))
		_, err := postgres.Open(dsn, nil)
		wantErr(t, "Open of a store marked as another application's", err, kv.ErrForeign)
	})
	t.Run("future format", func(t *testing.T) {
		db, dsn := newDB(t)
		create1(t, dsn)
		must(t, s.Exec(db, "UPDATE avfs_meta SET value = '99' WHERE key = 'format'"))
		_, err := postgres.Open(dsn, nil)
		wantErr(t, "Open of a format from the future", err, kv.ErrNewerFormat)
		_, err = postgres.Create(dsn, &postgres.Options{Table: "second"})
		wantErr(t, "Create of a table in a store from the future", err, kv.ErrNewerFormat)
	})
	t.Run("garbled format", func(t *testing.T) {
		db, dsn := newDB(t)
		create1(t, dsn)
		must(t, s.Exec(db, "UPDATE avfs_meta SET value = 'one' WHERE key = 'format'"))
		_, err := postgres.Open(dsn, nil)
		wantErr(t, "Open of a garbled format", err, kv.ErrCorrupt)
	})
	t.Run("wrong table shape", func(t *testing.T) {
		db, dsn := newDB(t)
		create1(t, dsn)
		must(t, s.Exec(db, "DROP TABLE avfs_pairs; CREATE TABLE avfs_pairs (store bigint, k text, v text, PRIMARY KEY (store, k))"))
		_, err := postgres.Open(dsn, nil)
		wantErr(t, "Open of a pairs table of the wrong shape", err, kv.ErrCorrupt)
	})
	t.Run("exists", func(t *testing.T) {
		_, dsn := newDB(t)
		create1(t, dsn)
		_, err := postgres.Create(dsn, nil)
		wantErr(t, "a second Create", err, fs.ErrExist)
		e, err := postgres.Open(dsn, nil)
		if err != nil {
			t.Fatalf("Open after Create: %v", err)
		}
		e.Close()
		_, err = postgres.Open(dsn, &postgres.Options{Table: "other"})
		wantErr(t, "Open of a table not in the store", err, fs.ErrNotExist)
	})
	t.Run("bad table name", func(t *testing.T) {
		_, dsn := newDB(t)
		for _, name := range []string{"Upper", "a;drop", "avfs_meta", strings.Repeat("a", 64)} {
			if _, err := postgres.Create(dsn, &postgres.Options{Table: name}); err == nil {
				t.Errorf("Create with table %q succeeded", name)
			}
		}
	})
}

func create1(t *testing.T, dsn string) {
	t.Helper()
	e, err := postgres.Create(dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(t, e.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("v")) }))
	must(t, e.Close())
}

func count(t *testing.T, s *pgtest.Server, db, q string) int {
	t.Helper()
	n, err := s.QueryInt(db, q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriterLock: a writer waits for another's open batch, up to the lock
// timeout, then gets kv.ErrBusy; readers do not wait.
func TestWriterLock(t *testing.T) {
	_, dsn := newDB(t)
	e1, err := postgres.Create(dsn, nil)
	must(t, err)
	defer e1.Close()
	e2, err := postgres.Open(dsn, &postgres.Options{LockTimeout: 200 * time.Millisecond})
	must(t, err)
	defer e2.Close()
	b, err := e1.Batch()
	must(t, err)
	must(t, b.Step(func(tx kv.Tx) error { return tx.Put([]byte("a"), []byte("1")) }))
	start := time.Now()
	err = e2.Update(func(tx kv.Tx) error { return tx.Put([]byte("b"), []byte("2")) })
	wantErr(t, "Update beside an open batch", err, kv.ErrBusy)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("gave up after %v, before the lock timeout", d)
	}
	must(t, e2.View(func(tx kv.Tx) error {
		_, err := tx.Get([]byte("a"))
		if err != kv.ErrNotFound {
			t.Errorf("a reader sees the open batch: %v", err)
		}
		return nil
	}))
	must(t, b.Commit())
	must(t, e2.Update(func(tx kv.Tx) error { return tx.Put([]byte("b"), []byte("2")) }))
}

// TestRetry: an Update whose transaction failed to serialize runs again,
// and the retries are counted; other errors are not retried.
func TestRetry(t *testing.T) {
	e := create(t)
	calls := 0
	err := e.Update(func(tx kv.Tx) error {
		calls++
		if calls < 3 {
			return &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
		}
		return tx.Put([]byte("k"), []byte("v"))
	})
	must(t, err)
	if calls != 3 || e.Retries() != 2 {
		t.Errorf("%d calls, %d retries; want 3, 2", calls, e.Retries())
	}
	boom := errors.New("boom")
	calls = 0
	if err := e.Update(func(kv.Tx) error { calls++; return boom }); err != boom || calls != 1 {
		t.Errorf("a plain error: %v after %d calls, want it unchanged after 1", err, calls)
	}
}

// TestStepUndoneAfterSend: a step whose writes already reached the server
// (a read sent them) is rolled back to its savepoint when it fails.
func TestStepUndoneAfterSend(t *testing.T) {
	e := create(t)
	b, err := e.Batch()
	must(t, err)
	must(t, b.Step(func(tx kv.Tx) error { return tx.Put([]byte("kept"), []byte("1")) }))
	boom := errors.New("boom")
	err = b.Step(func(tx kv.Tx) error {
		must(t, tx.Put([]byte("gone"), []byte("1")))
		if _, err := tx.Get([]byte("gone")); err != nil { // sends the put
			return err
		}
		must(t, tx.Put([]byte("gone2"), []byte("1")))
		return boom
	})
	if err != boom {
		t.Fatalf("step: %v, want boom", err)
	}
	must(t, b.Step(func(tx kv.Tx) error { return tx.Put([]byte("after"), []byte("1")) }))
	must(t, b.Commit())
	var keys []string
	must(t, e.View(func(tx kv.Tx) error {
		return tx.Scan(nil, nil, func(k, _ []byte) (bool, error) { keys = append(keys, string(k)); return true, nil })
	}))
	if strings.Join(keys, ",") != "after,kept" {
		t.Errorf("after the batch: %q, want after,kept", keys)
	}
}

// TestTimeout: a transaction that runs past Options.Timeout fails, and the
// engine stays usable.
func TestTimeout(t *testing.T) {
	_, dsn := newDB(t)
	create1(t, dsn)
	e, err := postgres.Open(dsn, &postgres.Options{Timeout: 300 * time.Millisecond})
	must(t, err)
	defer e.Close()
	err = e.View(func(tx kv.Tx) error {
		time.Sleep(400 * time.Millisecond)
		_, err := tx.Get([]byte("k"))
		return err
	})
	wantErr(t, "a Get past the time limit", err, context.DeadlineExceeded)
	must(t, e.View(func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return err }))
}

// TestWritersQueue: writers of one table on separate engines (as separate
// hosts would be) queue on the writer lock instead of failing one
// another's serialization, so none is retried.
func TestWritersQueue(t *testing.T) {
	_, dsn := newDB(t)
	create1(t, dsn)
	const writers, increments = 8, 20
	done := make(chan error, writers)
	var dbs []*postgres.DB
	for range writers {
		e, err := postgres.Open(dsn, nil)
		must(t, err)
		defer e.Close()
		dbs = append(dbs, e)
	}
	for _, e := range dbs {
		go func() {
			for range increments {
				err := e.Update(func(tx kv.Tx) error {
					v, err := tx.Get([]byte("n"))
					if err != nil && err != kv.ErrNotFound {
						return err
					}
					return tx.Put([]byte("n"), append(v, 'x'))
				})
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range writers {
		must(t, <-done)
	}
	var retries int64
	for _, e := range dbs {
		retries += e.Retries()
	}
	must(t, dbs[0].View(func(tx kv.Tx) error {
		v, err := tx.Get([]byte("n"))
		if len(v) != writers*increments {
			t.Errorf("counter %d, want %d", len(v), writers*increments)
		}
		return err
	}))
	if retries != 0 {
		t.Errorf("%d retries, want none: writers should queue on the lock", retries)
	}
}
