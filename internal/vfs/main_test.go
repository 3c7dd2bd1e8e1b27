package vfs_test

import (
	"os"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
)

// TestMain stops the PostgreSQL server the postgres model test starts.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
