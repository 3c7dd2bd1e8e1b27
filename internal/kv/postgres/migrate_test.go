package postgres_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// format1 is a format-1 database as the old code made it: a table per
// store, two stores sharing chunks in a third, a lease, and a table of
// another shape that is no store.
const format1 = `
CREATE TABLE avfs_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO avfs_meta VALUES ('application', 'avfs'), ('format', '1');
CREATE TABLE avfs_leases (store text PRIMARY KEY, host text NOT NULL, pid integer NOT NULL,
	token text NOT NULL, expires timestamptz NOT NULL);
CREATE TABLE avfs_kv (k bytea PRIMARY KEY, v bytea NOT NULL);
INSERT INTO avfs_kv VALUES ('a', '1'), ('b', '2');
CREATE TABLE va (k bytea PRIMARY KEY, v bytea NOT NULL);
INSERT INTO va VALUES ('A', 'a''s own'), ('Z', 'a''s last');
CREATE TABLE chunks (k bytea PRIMARY KEY, v bytea NOT NULL);
INSERT INTO chunks VALUES ('C1', 'chunk one'), ('C2', 'chunk two');
INSERT INTO avfs_leases VALUES ('va', 'gone-host', 1, 'tok', now() - interval '1 hour');
CREATE TABLE notes (id int PRIMARY KEY, body text);
`

// TestFormat1Migrated: a format-1 database is migrated to the one table
// at the first open, in one transaction: every store keeps its pairs
// (the shared one included), the old tables are gone, the format is 2,
// and a table that is no store is left alone.
func TestFormat1Migrated(t *testing.T) {
	db, dsn := newDB(t)
	s := pgtest.Get(t)
	must(t, s.Exec(db, format1))

	e, err := postgres.Open(dsn, nil)
	if err != nil {
		t.Fatalf("open of a format-1 store: %v", err)
	}
	defer e.Close()
	if got := scanAll(t, e); got != "a=1,b=2" {
		t.Errorf("avfs_kv after migration: %q", got)
	}
	if n := count(t, s, db, "SELECT value::int FROM avfs_meta WHERE key = 'format'"); n != postgres.FormatVersion {
		t.Errorf("format %d after migration, want %d", n, postgres.FormatVersion)
	}
	if n := count(t, s, db, "SELECT count(*) FROM pg_tables WHERE tablename IN ('avfs_kv', 'va', 'chunks')"); n != 0 {
		t.Errorf("%d format-1 store tables left", n)
	}
	if n := count(t, s, db, "SELECT count(*) FROM notes"); n != 0 {
		t.Errorf("notes: %d rows", n)
	}
	if n := count(t, s, db, "SELECT count(*) FROM avfs_stores"); n != 3 {
		t.Errorf("%d stores, want 3", n)
	}

	va, err := postgres.Open(dsn, &postgres.Options{Table: "va", Shared: &postgres.Shared{Prefix: []byte("C"), Table: "chunks"}})
	if err != nil {
		t.Fatal(err)
	}
	defer va.Close()
	if got := scanAll(t, va); got != "A=a's own,C1=chunk one,C2=chunk two,Z=a's last" {
		t.Errorf("va with its shared chunks after migration: %q", got)
	}
	// The old lease, expired, is still the store's and can be taken.
	l, err := va.Lease(t.Context(), "host", 2, 0)
	must(t, err)
	must(t, l.Release())

	// A second open finds format 2 and migrates nothing again.
	e2, err := postgres.Open(dsn, nil)
	must(t, err)
	must(t, e2.Close())
	if n := count(t, s, db, "SELECT count(*) FROM avfs_pairs"); n != 6 {
		t.Errorf("%d pairs after a second open, want 6", n)
	}
}

func scanAll(t *testing.T, e kv.Engine) string {
	t.Helper()
	out := ""
	must(t, e.View(func(tx kv.Tx) error {
		return tx.Scan(nil, nil, func(k, v []byte) (bool, error) {
			if out != "" {
				out += ","
			}
			out += string(k) + "=" + string(v)
			return true, nil
		})
	}))
	return out
}

// TestStoresAreRows: stores are rows of the database's four tables, not
// tables: making and dropping them changes no schema, and a drop takes
// its store's pairs and lease with it and leaves the others' alone.
func TestStoresAreRows(t *testing.T) {
	db, dsn := newDB(t)
	s := pgtest.Get(t)
	create1(t, dsn)
	tables := count(t, s, db, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()")
	if tables != 4 {
		t.Errorf("%d tables in a new store, want 4", tables)
	}
	for _, name := range []string{"one", "two", "three"} {
		e, err := postgres.Create(dsn, &postgres.Options{Table: name})
		must(t, err)
		must(t, e.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte(name)) }))
		_, err = e.Lease(t.Context(), "h", 1, 0)
		must(t, err)
		if name == "two" {
			must(t, e.Close())
			continue
		}
		defer e.Close()
	}
	if n := count(t, s, db, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"); n != tables {
		t.Errorf("%d tables after 3 more stores, want %d", n, tables)
	}
	must(t, postgres.Drop(dsn, &postgres.Options{Table: "two"}))
	must(t, postgres.Drop(dsn, &postgres.Options{Table: "two"})) // gone already: no error
	if _, err := postgres.Open(dsn, &postgres.Options{Table: "two"}); err == nil {
		t.Error("a dropped store opens")
	}
	if n := count(t, s, db, "SELECT count(*) FROM avfs_pairs"); n != 3 {
		t.Errorf("%d pairs after the drop, want the 3 of avfs_kv, one and three", n)
	}
	if n := count(t, s, db, "SELECT count(*) FROM avfs_leases WHERE store = 'two'"); n != 0 {
		t.Errorf("the dropped store's lease is left")
	}
	got, err := postgres.List(dsn, nil)
	must(t, err)
	names := ""
	for _, st := range got {
		names += st.Name + " "
		if st.Age < 0 || st.Age > time.Minute {
			t.Errorf("store %s is %v old", st.Name, st.Age)
		}
	}
	if names != "avfs_kv one three " {
		t.Errorf("List: %q", names)
	}
	_, empty := newDB(t)
	if got, err := postgres.List(empty, nil); err != nil || len(got) != 0 {
		t.Errorf("List of an empty database: %v, %v", got, err)
	}
}

// TestStoresDoNotConflict: writers of two stores, which share avfs_pairs
// and its index pages but not a writer lock, both commit: a batch that
// scanned its whole store while another store's writer scanned and wrote
// its own is not failed for it (it could not be run again).
func TestStoresDoNotConflict(t *testing.T) {
	_, dsn := newDB(t)
	open := func(name string) *postgres.DB {
		e, err := postgres.Create(dsn, &postgres.Options{Table: name})
		must(t, err)
		t.Cleanup(func() { e.Close() })
		must(t, e.Update(func(tx kv.Tx) error {
			for i := range 5000 {
				if err := tx.Put(fmt.Appendf(nil, "k%05d", i), make([]byte, 100)); err != nil {
					return err
				}
			}
			return nil
		}))
		return e
	}
	a, b := open("a"), open("b")
	count := func(tx kv.Tx) (int, error) {
		n := 0
		err := tx.Scan(nil, nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
		return n, err
	}
	// Both read their whole store, then both write: a cycle of read and
	// write dependencies if the stores' pages were one predicate.
	ba, err := a.Batch()
	must(t, err)
	must(t, ba.Step(func(tx kv.Tx) error { _, err := count(tx); return err }))
	calls := 0
	must(t, b.Update(func(tx kv.Tx) error {
		calls++
		n, err := count(tx)
		if err != nil {
			return err
		}
		if calls == 1 {
			must(t, ba.Step(func(tx kv.Tx) error { return tx.Put([]byte("a-count"), []byte("5000")) }))
			must(t, ba.Read(func(tx kv.Tx) error { _, err := tx.Get([]byte("a-count")); return err })) // sends it
		}
		return tx.Put([]byte("b-count"), fmt.Appendf(nil, "%d", n))
	}))
	if err := ba.Commit(); err != nil {
		t.Fatalf("a batch of one store, beside a writer of another: %v", err)
	}
	if b.Retries() != 0 {
		t.Errorf("the other store's writer was retried %d times", b.Retries())
	}
}

// TestCreateWrittenByFirstCommit: a store Create adds with Unique is
// written by its first commit (no commit of its own), or by Close; until
// then no other engine opens it, and of two creators of one name (which
// Unique promises never happens) the second to commit is told the store
// exists. Without Unique the second Create is told at once.
func TestCreateWrittenByFirstCommit(t *testing.T) {
	_, dsn := newDB(t)
	create1(t, dsn) // the database's tables
	opts := func(name string) *postgres.Options { return &postgres.Options{Table: name, Unique: true} }

	x, err := postgres.Create(dsn, opts("x"))
	must(t, err)
	if _, err := postgres.Open(dsn, opts("x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a store before its first commit: %v", err)
	}
	must(t, x.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("x")) }))
	x2, err := postgres.Open(dsn, opts("x"))
	if err != nil {
		t.Fatalf("open after the first commit: %v", err)
	}
	must(t, x2.Close())
	must(t, x.Close())

	y, err := postgres.Create(dsn, opts("y"))
	must(t, err)
	must(t, y.Close())
	y2, err := postgres.Open(dsn, opts("y"))
	if err != nil {
		t.Fatalf("open of a store closed without a write: %v", err)
	}
	must(t, y2.Close())

	z1, err := postgres.Create(dsn, opts("z"))
	must(t, err)
	z2, err := postgres.Create(dsn, opts("z"))
	must(t, err)
	b, err := z1.Batch()
	must(t, err)
	must(t, b.Step(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("z1")) }))
	must(t, b.Commit())
	err = z2.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("z2")) })
	wantErr(t, "the second creator's first commit", err, fs.ErrExist)
	must(t, z1.Close())
	z2.Close()
	z, err := postgres.Open(dsn, opts("z"))
	must(t, err)
	defer z.Close()
	if got := scanAll(t, z); got != "k=z1" {
		t.Errorf("z holds %q, want the first creator's k=z1", got)
	}

	w1, err := postgres.Create(dsn, &postgres.Options{Table: "w"})
	must(t, err)
	defer w1.Close()
	_, err = postgres.Create(dsn, &postgres.Options{Table: "w"})
	wantErr(t, "a second Create of a store not yet written to", err, fs.ErrExist)
}
