package sqlite

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateTemplate = flag.Bool("update-template", false, "rewrite template.db from the current schema")

// TestTemplate checks that the embedded template is exactly what building a
// vault database the slow way produces today (schema, application_id, WAL
// mode, page size), so that Create's fast copy never drifts from it.
func TestTemplate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "built.db")
	if err := build(p); err != nil {
		t.Fatal(err)
	}
	built, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if *updateTemplate {
		if err := os.WriteFile("template.db", built, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(built, templateDB) {
		t.Fatal("template.db is out of date: run go test ./internal/kv/sqlite -run TestTemplate -update-template")
	}
	db, err := Create(filepath.Join(t.TempDir(), "new.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.w.checkVault(); err != nil {
		t.Fatalf("a vault made from the template: %v", err)
	}
}
