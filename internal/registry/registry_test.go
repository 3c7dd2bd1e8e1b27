package registry_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/fsynctest"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

func newHome(t *testing.T) *registry.Home {
	t.Helper()
	h, err := registry.Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNames(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"task-001", true}, {"_x", true}, {strings.Repeat("n", 64), true},
		{"", false}, {"-x", false}, {"../x", false}, {"a/b", false}, {"a.b", false},
		{strings.Repeat("n", 65), false}, {"a\x00b", false}, {"a b", false},
	}
	h := newHome(t)
	for _, c := range cases {
		err := registry.CheckName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if c.ok {
			continue
		}
		if !errs.Is(err, errs.InvalidInput) {
			t.Errorf("CheckName(%q): kind %s", c.name, errs.KindOf(err))
		}
		if _, err := h.Create(c.name, registry.CreateOptions{}); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("Create(%q) = %v", c.name, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(h.Dir, "vaults"))
	if len(entries) != 0 {
		t.Fatalf("bad names created files: %v", entries)
	}
}

func TestCreateOpenModes(t *testing.T) {
	h := newHome(t)
	for _, engine := range engines.Names() {
		v, err := h.Create("v-"+engine, registry.CreateOptions{Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
		if _, err := h.Create("v-"+engine, registry.CreateOptions{Engine: engine}); !errs.Is(err, errs.VaultExists) {
			t.Fatalf("second create: %v", err)
		}
		fi, err := os.Stat(h.Path("v-" + engine))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("vault file mode %v, %v", fi.Mode(), err)
		}
	}
	fi, err := os.Stat(h.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home mode %v, %v", fi.Mode(), err)
	}
	if _, err := h.Open("missing"); !errs.Is(err, errs.VaultNotFound) {
		t.Fatalf("open of a missing vault: %v", err)
	}
	first := "v-" + engines.Names()[0]
	if cur, err := h.Current(); err != nil || cur != first {
		t.Fatalf("current after the first create = %q, %v; want %s", cur, err, first)
	}
	if err := h.Use("v-sqlite"); err != nil {
		t.Fatal(err)
	}
	if cur, err := h.Current(); err != nil || cur != "v-sqlite" {
		t.Fatalf("current = %q, %v", cur, err)
	}
	list, err := h.List()
	if err != nil || len(list) != len(engines.Names()) {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

// TestFirstVaultBecomesCurrent: the first vault created in a home with no
// current vault is made current; later ones, and forks, leave it alone;
// once the current vault is deleted, the next one created takes its place.
func TestFirstVaultBecomesCurrent(t *testing.T) {
	h := newHome(t)
	if _, err := h.Current(); !errs.Is(err, errs.NoActiveVault) {
		t.Fatalf("current of an empty home: %v", err)
	}
	for _, name := range []string{"first", "second"} {
		v, err := h.Create(name, registry.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
	}
	if _, err := h.Create("first", registry.CreateOptions{}); !errs.Is(err, errs.VaultExists) {
		t.Fatalf("create of an existing vault: %v", err)
	}
	f, err := h.Fork("first", "fork")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if cur, err := h.Current(); err != nil || cur != "first" {
		t.Fatalf("current = %q, %v; want first", cur, err)
	}
	if err := h.Use("second"); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete("second"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Current(); !errs.Is(err, errs.NoActiveVault) {
		t.Fatalf("current after deleting it: %v", err)
	}
	v, err := h.Create("third", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	if cur, err := h.Current(); err != nil || cur != "third" {
		t.Fatalf("current = %q, %v; want third", cur, err)
	}
}

func TestForeignAndIncompleteFiles(t *testing.T) {
	h := newHome(t)
	for name, content := range map[string]string{"text": "hello, not a vault", "empty": ""} {
		if err := os.WriteFile(h.Path(name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Open(name); !errs.Is(err, errs.CorruptVault) {
			t.Fatalf("open of %s file: %v", name, err)
		}
		if err := h.Delete(name); err != nil {
			t.Fatalf("delete of %s file: %v", name, err)
		}
	}
	// A vault file whose creation never finished is replaced by the next create.
	eng, err := engines.Create(h.Path("half"), engines.Default)
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	if _, err := h.Open("half"); !errors.Is(err, vfs.ErrIncomplete) {
		t.Fatalf("open of an unfinished vault: %v", err)
	}
	v, err := h.Create("half", registry.CreateOptions{})
	if err != nil {
		t.Fatalf("create over an unfinished vault: %v", err)
	}
	v.Close()
}

func TestForkDeleteRules(t *testing.T) {
	h := newHome(t)
	base, err := h.Create("base", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base.Close()
	for _, name := range []string{"f1", "f2"} {
		f, err := h.Fork("base", name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if _, err := h.Fork("base", "f1"); !errs.Is(err, errs.VaultExists) {
		t.Fatalf("fork onto an existing name: %v", err)
	}
	if _, err := h.Fork("missing", "x"); !errs.Is(err, errs.VaultNotFound) {
		t.Fatalf("fork of a missing vault: %v", err)
	}
	err = h.Delete("base")
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.VaultHasForks || len(e.Extra["forks"].([]string)) != 2 {
		t.Fatalf("delete of a parent: %v", err)
	}
	for _, name := range []string{"f1", "f2"} {
		if err := h.Delete(name); err != nil {
			t.Fatal(err)
		}
	}
	// The parent's pins went with the forks: it can be deleted now.
	if err := h.Delete("base"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open("base"); !errs.Is(err, errs.VaultNotFound) {
		t.Fatalf("deleted vault still opens: %v", err)
	}
}

func TestConcurrentCreateOneWins(t *testing.T) {
	h := newHome(t)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := h.Create("race", registry.CreateOptions{})
			if err == nil {
				v.Close()
			}
			results[i] = err
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range results {
		switch {
		case err == nil:
			wins++
		case !errs.Is(err, errs.VaultExists):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d creators won", wins)
	}
}

// TestBeforeOpen: Open, and Fork for its source, ask BeforeOpen first
// with the vault's name (the CLI has a mount persist there); its error
// fails the open. A fork's parents, opened under it, are not asked.
func TestBeforeOpen(t *testing.T) {
	h := newHome(t)
	v, err := h.Create("base", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	var asked []string
	refuse := errors.New("refused")
	h.BeforeOpen = func(vault string) error {
		asked = append(asked, vault)
		if vault == "nope" {
			return refuse
		}
		return nil
	}
	f, err := h.Fork("base", "task")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if v, err = h.Open("task"); err != nil {
		t.Fatal(err)
	}
	v.Close()
	if _, err := h.Open("nope"); !errors.Is(err, refuse) {
		t.Errorf("Open with BeforeOpen failing: %v", err)
	}
	if _, err := h.Open("../x"); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("Open of a bad name: %v", err)
	}
	if got := strings.Join(asked, " "); got != "base task nope" {
		t.Errorf("BeforeOpen asked for %q, want %q", got, "base task nope")
	}
}

// TestUseIsDurable: the current-vault pointer is replaced with an fsync
// of the file and of the home directory, and a disk that fails the fsync
// fails `vault use` and leaves the pointer as it was.
func TestUseIsDurable(t *testing.T) {
	s := fsynctest.Mount(t)
	local, err := registry.Open(s.Backing) // the vault files, beside the mount
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		v, err := local.Create(name, registry.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
	}
	h, err := registry.Open(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Use("a"); err != nil {
		t.Fatal(err)
	}
	if s.FileSyncs(func(p string) bool { return strings.HasPrefix(p, ".current.tmp-") }) != 1 || s.DirSyncs("") != 1 {
		t.Errorf("vault use synced the pointer %d times and the home %d times, want 1 and 1",
			s.FileSyncs(func(p string) bool { return strings.HasPrefix(p, ".current.tmp-") }), s.DirSyncs(""))
	}
	s.Fail(true)
	err = h.Use("b")
	s.Fail(false)
	if !errs.Is(err, errs.IoError) {
		t.Fatalf("vault use on a failing disk: %v, want IoError", err)
	}
	if cur, err := h.Current(); err != nil || cur != "a" {
		t.Fatalf("current vault after a failed use: %q, %v; want a", cur, err)
	}
}
