package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kindsInCode reads every error kind declared under internal/ from the
// source: each constant of type errs.Kind (Kind inside package errs).
func kindsInCode(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	err := filepath.WalkDir("../../internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if !isKindType(vs.Type, f.Name.Name) {
					continue
				}
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: kind %s is not a string literal", path, vs.Names[i])
						continue
					}
					s, _ := strconv.Unquote(lit.Value)
					found[s] = path
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func isKindType(e ast.Expr, pkg string) bool {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == "errs" && x.Sel.Name == "Kind"
	case *ast.Ident:
		return pkg == "errs" && x.Name == "Kind"
	}
	return false
}

// notPrinted are kinds declared in the code that no error document carries.
var notPrinted = map[string]string{
	"PolicyDenied": "a denied run prints its envelope (state denied, exit 14), never an error document",
}

// TestErrorKindsEnum: every error kind declared in the code is in the exit
// code table (so ErrorKinds lists it), and docs/schema/error.json's enum,
// which the clients' typed kinds are generated from, is ErrorKinds.
func TestErrorKindsEnum(t *testing.T) {
	t.Parallel()
	code := kindsInCode(t)
	if len(code) < 30 {
		t.Fatalf("found only %d kinds in the source: %v", len(code), code)
	}
	listed := map[string]bool{}
	for _, k := range ErrorKinds() {
		listed[string(k)] = true
		if _, ok := code[string(k)]; !ok {
			t.Errorf("kind %s is in the exit code table but declared nowhere under internal/", k)
		}
	}
	for k, path := range code {
		if !listed[k] && notPrinted[k] == "" {
			t.Errorf("kind %s (%s) is in no row of the exit code table, so not in error.json's enum", k, path)
		}
	}
	const file = "../../docs/schema/error.json"
	cur, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ErrorSchema(cur)
	if err != nil {
		t.Fatal(err)
	}
	if string(cur) != string(want) {
		t.Errorf("%s: the error enum is not ErrorKinds(): run `go run ./internal/cli/genmanifest`", file)
	}
	if !slices.IsSorted(ErrorKinds()) {
		t.Error("ErrorKinds is not sorted")
	}
}
