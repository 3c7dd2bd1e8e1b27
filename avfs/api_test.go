package avfs_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnTypes: the exported API of avfs names no type of an internal
// package, not as an alias, not as a field, a parameter, a result or a
// constant's type, so `go doc` shows every field a caller gets and an
// internal change cannot change the API unseen.
func TestOwnTypes(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// The imports are read from their export data, which `go list
	// -export` builds (from the build cache, usually): type-checking them
	// from source would take seconds.
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	export := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "=")
		export[path] = file
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if export[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(export[path])
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check("github.com/agentvfs/agentvfs/avfs", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range internalTypes(pkg) {
		t.Error(bad)
	}
}

// internalTypes lists where pkg's exported API reaches an internal type.
func internalTypes(pkg *types.Package) []string {
	var bad []string
	seen := map[types.Type]bool{}
	var walk func(where string, typ types.Type)
	walk = func(where string, typ types.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		switch tt := typ.(type) {
		case *types.Alias:
			if p := tt.Obj().Pkg(); p == pkg {
				bad = append(bad, where+": "+tt.Obj().Name()+" is an alias of "+types.Unalias(tt).String())
			}
			walk(where, types.Unalias(tt))
		case *types.Named:
			obj := tt.Obj()
			if p := obj.Pkg(); p != nil && strings.Contains(p.Path()+"/", "/internal/") {
				bad = append(bad, where+": "+tt.String())
				return
			}
			if obj.Pkg() != pkg {
				return // the standard library's types are its own
			}
			walk(obj.Name(), tt.Underlying())
			for m := range tt.Methods() {
				if m.Exported() {
					walk(obj.Name()+"."+m.Name(), m.Type())
				}
			}
		case *types.Struct:
			for f := range tt.Fields() {
				if f.Exported() {
					walk(where+"."+f.Name(), f.Type())
				}
			}
		case *types.Signature:
			for v := range tt.Params().Variables() {
				walk(where+"("+v.Name()+")", v.Type())
			}
			for v := range tt.Results().Variables() {
				walk(where+" result", v.Type())
			}
		case *types.Pointer:
			walk(where, tt.Elem())
		case *types.Slice:
			walk(where, tt.Elem())
		case *types.Array:
			walk(where, tt.Elem())
		case *types.Map:
			walk(where, tt.Key())
			walk(where, tt.Elem())
		case *types.Chan:
			walk(where, tt.Elem())
		case *types.Interface:
			for m := range tt.Methods() {
				walk(where+"."+m.Name(), m.Type())
			}
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		if tn, ok := obj.(*types.TypeName); ok && tn.IsAlias() {
			bad = append(bad, name+" is an alias of "+types.Unalias(tn.Type()).String())
			continue
		}
		walk(name, obj.Type())
	}
	return bad
}
