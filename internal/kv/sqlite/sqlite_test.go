package sqlite_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sqlite3 "github.com/ncruces/go-sqlite3"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

func newDB(t *testing.T, opts *sqlite.Options) (*sqlite.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vault.db")
	db, err := sqlite.Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Engine {
		db, _ := newDB(t, nil)
		return db
	})
}

func TestCreate(t *testing.T) {
	db, path := newDB(t, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Create(path, nil); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing file = %v, want os.ErrExist", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	hdr := make([]byte, 100)
	f, _ := os.Open(path)
	defer f.Close()
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	if id := binary.BigEndian.Uint32(hdr[68:]); id != sqlite.ApplicationID {
		t.Errorf("application_id %#x, want %#x", id, sqlite.ApplicationID)
	}
	if hdr[18] != 2 || hdr[19] != 2 {
		t.Errorf("file format bytes %d,%d: want WAL (2,2)", hdr[18], hdr[19])
	}
}

func TestSidecarModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	db, path := newDB(t, nil)
	if err := db.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600 like the vault", suffix, fi.Mode().Perm())
		}
	}
}

func TestReopen(t *testing.T) {
	db, path := newDB(t, nil)
	if err := db.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx kv.Tx) error {
		v, err := tx.Get([]byte("k"))
		if err == nil && string(v) != "v" {
			err = fmt.Errorf("got %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Another program's SQLite database: valid, but not a vault.
	other := filepath.Join(dir, "other.db")
	c, err := sqlite3.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// A vault with its header damaged past the magic: only SQLite notices.
	_, vault := newDB(t, nil)
	data, err := os.ReadFile(vault)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[100:], make([]byte, 200)) // page 1's b-tree header
	damaged := write("damaged.db", data)

	tests := []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "nope"), os.ErrNotExist},
		{"text", write("text", []byte("hello, world\n")), kv.ErrForeign},
		{"other sqlite", other, kv.ErrForeign},
		{"magic only", write("magic", []byte(sqlite.Magic)), kv.ErrCorrupt},
		{"damaged page 1", damaged, kv.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlite.Open(tc.path, nil)
			if err == nil {
				// Damage SQLite finds only on use must surface then.
				err = db.View(func(tx kv.Tx) error {
					return tx.Scan(nil, nil, func(k, v []byte) (bool, error) { return true, nil })
				})
				db.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestBusy holds the write lock from a second connection, as another
// process would, and checks that Update gives up with kv.ErrBusy.
func TestBusy(t *testing.T) {
	db, path := newDB(t, &sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	other, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Exec(`BEGIN IMMEDIATE; INSERT INTO kv VALUES(x'01', x'')`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = db.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), nil) })
	if !errors.Is(err, kv.ErrBusy) {
		t.Fatalf("Update under a foreign write lock = %v, want ErrBusy", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("gave up after %v, before the busy timeout", d)
	}
	// Readers are not blocked by the writer (WAL).
	if err := db.View(func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return ignoreNotFound(err) }); err != nil {
		t.Fatal(err)
	}
	if err := other.Exec(`COMMIT`); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx kv.Tx) error { return tx.Put([]byte("k"), nil) }); err != nil {
		t.Fatalf("Update after the lock is released: %v", err)
	}
}

func ignoreNotFound(err error) error {
	if err == kv.ErrNotFound {
		return nil
	}
	return err
}

const (
	childEnv   = "AVFS_KV_SQLITE_CHILD"
	childIncrs = 200
)

// TestCrossProcessWriters runs two copies of this test binary that
// increment one counter in one vault; SQLite's file locks must serialize
// them so that no increment is lost.
func TestCrossProcessWriters(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		childIncrement(t, path)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	db, path := newDB(t, nil)
	const children = 2
	cmds := make([]*exec.Cmd, children)
	outs := make([]strings.Builder, children)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestCrossProcessWriters$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), childEnv+"="+path)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// This process writes too, through its own engine.
	for range childIncrs {
		if err := db.Update(increment); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v\n%s", err, outs[i].String())
		}
	}
	var n int
	err := db.View(func(tx kv.Tx) error {
		v, err := tx.Get([]byte("counter"))
		if err == nil {
			n, err = strconv.Atoi(string(v))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := (children + 1) * childIncrs; n != want {
		t.Fatalf("counter = %d, want %d: increments were lost", n, want)
	}
}

func childIncrement(t *testing.T, path string) {
	db, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range childIncrs {
		if err := db.Update(increment); err != nil {
			t.Fatal(err)
		}
	}
}

func increment(tx kv.Tx) error {
	n := 0
	v, err := tx.Get([]byte("counter"))
	if err == nil {
		n, err = strconv.Atoi(string(v))
	}
	if err != nil && err != kv.ErrNotFound {
		return err
	}
	return tx.Put([]byte("counter"), strconv.AppendInt(nil, int64(n+1), 10))
}
