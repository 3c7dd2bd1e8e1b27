// Package engines is the one place that knows every kv engine: it creates
// vault files with a named engine, recognises which engine wrote a file,
// and opens it; and it opens stores on database servers by address
// (servers.go).
//
// A file is opened at most once per process. Create and Open return
// handles to one shared, reference-counted engine per file (identified by
// device and inode, so two paths to one file share it too). Two engines on
// one file in one process would fight over its locks (bbolt's flock would
// even block the second one), and would waste a connection pool and a page
// cache each. Every returned handle must be closed; the file is released
// when the last one is.
package engines

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/bolt"
	"github.com/agentvfs/agentvfs/internal/kv/internal/fsutil"
	"github.com/agentvfs/agentvfs/internal/kv/mem"
	"github.com/agentvfs/agentvfs/internal/kv/sqlite"
)

// Default is the engine new vaults get unless the user picks another.
const Default = sqlite.Name

// engine is one registered file engine.
type engine struct {
	name string
	caps kv.Capabilities
	// detect returns nil when f is this engine's file, an error wrapping
	// kv.ErrForeign when it is not, and one wrapping kv.ErrCorrupt when
	// it is but is damaged.
	detect func(f *os.File) error
	create func(path string) (kv.Engine, error)
	open   func(path string) (kv.Engine, error)
}

// all lists the file engines, in the order Detect tries them. Adding an
// engine means adding it here and nowhere else.
var all = []engine{
	{
		name:   sqlite.Name,
		caps:   sqlite.Caps,
		detect: sqlite.Detect,
		create: func(p string) (kv.Engine, error) { return sqlite.Create(p, nil) },
		open:   func(p string) (kv.Engine, error) { return sqlite.Open(p, nil) },
	},
	{
		name:   bolt.Name,
		caps:   bolt.Caps,
		detect: bolt.Detect,
		create: func(p string) (kv.Engine, error) { return bolt.Create(p, nil) },
		open:   func(p string) (kv.Engine, error) { return bolt.Open(p, nil) },
	},
}

// Names lists the file engines a vault can be created with.
func Names() []string {
	names := make([]string, len(all))
	for i, e := range all {
		names[i] = e.name
	}
	return names
}

func lookup(name string) (engine, bool) {
	for _, e := range all {
		if e.name == name {
			return e, true
		}
	}
	return engine{}, false
}

// Caps returns the capabilities of the named engine, and false when no
// engine has that name.
func Caps(name string) (kv.Capabilities, bool) {
	if e, ok := lookup(name); ok {
		return e.caps, true
	}
	for _, s := range servers {
		if s.name == name {
			return s.caps, true
		}
	}
	return kv.Capabilities{}, false
}

// CapsOf returns the capabilities of the engine that wrote the file at
// path, with Detect's errors.
func CapsOf(path string) (kv.Capabilities, error) {
	name, err := Detect(path)
	if err != nil {
		return kv.Capabilities{}, err
	}
	caps, _ := Caps(name)
	return caps, nil
}

// Files lists the files that hold the data of the store at path: path and
// those of its engine's data files that exist. It is what a store's size
// counts. A file no engine recognises is listed alone.
func Files(path string) []string {
	files := []string{path}
	caps, err := CapsOf(path)
	if err != nil {
		return files
	}
	for _, suffix := range caps.DataFiles {
		if _, err := os.Lstat(path + suffix); err == nil {
			files = append(files, path+suffix)
		}
	}
	return files
}

// Remove removes the store file at path and every file an engine keeps
// beside it. It removes the side files of every engine, not only the one
// Detect would name: a store whose creation was cut short may not be
// recognisable. A missing path is not an error.
func Remove(path string) error {
	err := os.Remove(path)
	for _, e := range all {
		for _, suffix := range slices.Concat(e.caps.DataFiles, e.caps.SideFiles) {
			if rerr := os.Remove(path + suffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
				err = rerr
			}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// NewMemory returns a new, empty in-memory engine (not shared: each call
// is a separate store).
func NewMemory() kv.Engine { return mem.New() }

// Create makes a new vault file at path (mode 0600) with the named engine
// and returns a handle to it. It fails with an error wrapping os.ErrExist
// when path exists, and with an error naming the known engines when name
// is not one of them.
func Create(path, name string) (kv.Engine, error) {
	e, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("kv: unknown engine %q (known: %q)", name, Names())
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	eng, err := e.create(path)
	if err != nil {
		return nil, err
	}
	id, err := fileID(eng.Path())
	if err != nil {
		eng.Close()
		return nil, err
	}
	return reg.add(id, eng), nil
}

// Open opens the vault file at path with whichever engine wrote it. The
// errors are those of Detect, plus the engine's own (kv.ErrBusy when
// another process holds the file, kv.ErrCorrupt for damage found late).
func Open(path string) (kv.Engine, error) {
	id, err := fileID(path)
	if err != nil {
		return nil, err
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if h := reg.share(id); h != nil {
		return h, nil
	}
	name, err := Detect(path)
	if err != nil {
		return nil, err
	}
	e, _ := lookup(name)
	eng, err := e.open(path)
	if err != nil {
		return nil, err
	}
	return reg.add(id, eng), nil
}

// Detect names the engine that wrote the file at path, from its first
// bytes. It returns an error wrapping os.ErrNotExist when there is no such
// file, kv.ErrForeign for any other file (an empty one included), and
// kv.ErrCorrupt when the file starts with a known engine's magic but is
// truncated or damaged.
func Detect(path string) (string, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, e := range all {
		err := e.detect(f)
		switch {
		case err == nil:
			return e.name, nil
		case errors.Is(err, kv.ErrForeign):
			// Another program's file of this format ("SQLite database
			// without our application_id") says more than the generic
			// message below.
			if err != kv.ErrForeign {
				return "", fmt.Errorf("%s: %w", path, err)
			}
		default:
			return "", fmt.Errorf("%s: %s: %w", path, e.name, err)
		}
	}
	return "", fmt.Errorf("%s: %w", path, kv.ErrForeign)
}
