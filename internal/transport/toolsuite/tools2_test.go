package toolsuite_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// More real tools run unchanged in a workspace (see tools_test.go): a Go
// toolchain building and testing a module, npm installing a package.

// goModule is a shell script creating a small module: a main package and
// a package with a test, no dependencies.
const goModule = `
mkdir -p mod/greet mod/bin
(
cd mod
cat > go.mod <<'EOF'
module example.com/mod

go 1.22
EOF
cat > main.go <<'EOF'
package main

import (
	"fmt"
	"os"

	"example.com/mod/greet"
)

func main() {
	fmt.Println(greet.Hello(os.Args[1:]...))
	data, err := os.ReadFile("greet/greet.go")
	if err != nil {
		panic(err)
	}
	fmt.Println("read", len(data), "bytes of source")
}
EOF
cat > greet/greet.go <<'EOF'
// Package greet greets.
package greet

import "strings"

// Hello greets names, or the world.
func Hello(names ...string) string {
	if len(names) == 0 {
		return "hello, world"
	}
	return "hello, " + strings.Join(names, " and ")
}
EOF
cat > greet/greet_test.go <<'EOF'
package greet

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHello(t *testing.T) {
	if got := Hello(); got != "hello, world" {
		t.Fatalf("Hello() = %q", got)
	}
	if got := Hello("a", "b"); got != "hello, a and b" {
		t.Fatalf("Hello(a, b) = %q", got)
	}
}

// TestTempDir writes where the go command puts the test's temporary
// files.
func TestTempDir(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
EOF
)
`

// goEnv sets the go command up offline, with its build cache in cache.
func goEnv(cache string) string {
	return fmt.Sprintf(`
export GOCACHE=%s GOFLAGS='-mod=mod -buildvcs=false' GOPROXY=off GOTOOLCHAIN=local GOSUMDB=off GOTELEMETRY=off CGO_ENABLED=0
`, cache)
}

// goSteps builds, vets and tests the module created by goModule, and
// runs the binaries it built in the mount from there.
const goSteps = `
cd mod
gofmt -l .
go vet ./...
go build -o bin/hello .
test -x bin/hello && echo built
./bin/hello
./bin/hello avfs fuse
go test -count=1 -v ./... 2>&1
go test -c -o bin/greet.test ./greet
./bin/greet.test -test.v -test.run Hello
rm bin/hello bin/greet.test
ls bin
echo done
`

// testTimes are the durations in go test's output.
var testTimes = regexp.MustCompile(`[0-9]+\.[0-9]+s\b`)

// TestGoBuild builds and tests a Go module in a workspace and compares
// with the native disk. The binaries built are written to the workspace
// and run from there.
//
// The build cache is the go command's own, outside the workspace: with
// an empty one each run compiles the standard library, which takes
// minutes here. The module's own packages are compiled in any case:
// their directory is part of what the cache is keyed on.
func TestGoBuild(t *testing.T) {
	need(t, "go")
	cache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil || !filepath.IsAbs(strings.TrimSpace(string(cache))) {
		t.Skipf("no go build cache: %s %v", cache, err)
	}
	onEach(t, func(t *testing.T, w *workspace) {
		native := t.TempDir()
		run := func(dir string) string {
			start := time.Now()
			out := sh(t, dir, goEnv(strings.TrimSpace(string(cache)))+goModule+goSteps)
			t.Logf("%s: %v", dir, time.Since(start))
			return testTimes.ReplaceAllString(out, "T")
		}
		got, want := run(w.Dir), run(native)
		if got != want {
			t.Errorf("go differs\n--- workspace:\n%s\n--- native:\n%s", got, want)
		}
		if !strings.Contains(got, "hello, avfs and fuse\n") || !strings.Contains(got, "ok  \texample.com/mod/greet") {
			t.Errorf("unexpected output:\n%s", got)
		}
		w.sameTree(native)
	})
}

// TestNpmInstall installs a local package tarball offline into a project
// in a workspace, with npm's cache outside it, and compares with the native
// disk: the manifest and lockfile npm writes, the installed tree, the bin
// link, require() from node, and a clean reinstall from the lockfile.
// (npm is slow to start: the test runs it twice per disk.)
func TestNpmInstall(t *testing.T) {
	need(t, "npm", "node")
	// The package, packed once on the native disk.
	src := t.TempDir()
	sh(t, src, `
mkdir -p tiny/lib
cd tiny
cat > package.json <<'EOF'
{
  "name": "tiny",
  "version": "1.2.3",
  "main": "lib/index.js",
  "bin": { "tiny": "bin.js" },
  "license": "MIT"
}
EOF
cat > lib/index.js <<'EOF'
exports.hello = (who) => "hello, " + who;
EOF
cat > bin.js <<'EOF'
#!/usr/bin/env node
console.log(require("./lib").hello(process.argv[2] || "bin"));
EOF
chmod +x bin.js
npm pack --silent --cache ../cache >/dev/null
`)
	tarball := filepath.Join(src, "tiny", "tiny-1.2.3.tgz")
	script := func() string {
		return fmt.Sprintf(`
npm() { command npm --offline --no-audit --no-fund --no-update-notifier --loglevel=error --cache %s "$@"; }
mkdir vendor proj
cp %s vendor/
cd proj
cat > package.json <<'EOF'
{ "name": "proj", "version": "1.0.0", "private": true }
EOF
npm install ../vendor/tiny-1.2.3.tgz >/dev/null
cat package.json package-lock.json
find node_modules | sort
readlink node_modules/.bin/tiny
node -e 'console.log(require("tiny").hello("avfs"))'
node_modules/.bin/tiny mount
rm -rf node_modules
npm ci >/dev/null
find node_modules -type f | sort | xargs cat
`, filepath.Join(t.TempDir(), "npm-cache"), tarball)
	}
	onEach(t, func(t *testing.T, w *workspace) {
		native := t.TempDir()
		start := time.Now()
		got := sh(t, w.Dir, script())
		mid := time.Now()
		want := sh(t, native, script())
		t.Logf("%s %v, native disk %v", w.tr.Name(), mid.Sub(start), time.Since(mid))
		if got != want {
			t.Errorf("npm differs\n--- workspace:\n%s\n--- native:\n%s", got, want)
		}
		if !strings.Contains(got, "hello, avfs\nhello, mount\n") {
			t.Errorf("node did not load the package:\n%s", got)
		}
		w.sameTree(native)
	})
}
