package engines_test

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestIsAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"postgres://u@h/db": true, "postgresql:///db?host=/run": true,
		"/home/v.avfs": false, "sqlite:///x": false, "": false, "Postgres": false,
	} {
		if got := engines.IsAddress(s); got != want {
			t.Errorf("IsAddress(%q) = %v", s, got)
		}
	}
	_, err := engines.OpenAt("mysql://u:pw123@h/db", "t")
	if err == nil || strings.Contains(err.Error(), "pw123") {
		t.Errorf("OpenAt of a foreign address: %v", err)
	}
	if c, ok := engines.Caps("postgres"); !ok || !c.SharedOpen {
		t.Errorf(`Caps("postgres") = %+v, %v`, c, ok)
	}
}

// TestServerConformance runs the suite through CreateAt and OpenAt: each
// case its own table, the tables side by side in one database.
func TestServerConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	kvtest.Run(t, func(t *testing.T) kv.Engine {
		table := "t" + strings.ToLower(strings.NewReplacer("/", "_").Replace(t.Name()))
		e, err := engines.CreateAt(dsn, table)
		if err == nil {
			err = e.Close()
		}
		if err == nil {
			e, err = engines.OpenAt(dsn, table)
		}
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
	if _, err := engines.OpenAt(dsn, "absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenAt of an absent table: %v, want fs.ErrNotExist", err)
	}
}
