package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/atomicfile"
	"github.com/agentvfs/agentvfs/internal/fsynctest"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "current")
	for _, want := range []string{"first\n", "second\n"} {
		if err := atomicfile.Write(p, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Fatalf("read %q, %v; want %q", b, err, want)
		}
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	assertOnly(t, dir, "current")
}

// TestWriteSyncsFileAndDirectory sees, through FUSE, the fsync of the new
// content and the fsync of the directory that makes the rename durable.
func TestWriteSyncsFileAndDirectory(t *testing.T) {
	s := fsynctest.Mount(t)
	if err := os.Mkdir(filepath.Join(s.Dir, "runs"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Dir, "runs", "r1.json")
	if err := atomicfile.Write(p, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := s.FileSyncs(func(p string) bool { return strings.HasPrefix(p, "runs/.r1.json.tmp-") }); n != 1 {
		t.Errorf("the temporary file was synced %d times, want 1", n)
	}
	if n := s.DirSyncs("runs"); n != 1 {
		t.Errorf("the directory was synced %d times, want 1", n)
	}
	assertOnly(t, filepath.Join(s.Backing, "runs"), "r1.json")
}

// TestWriteFailedSyncKeepsOld: a disk that fails the fsync fails the
// write, and the old content stays with no temporary file beside it.
func TestWriteFailedSyncKeepsOld(t *testing.T) {
	s := fsynctest.Mount(t)
	p := filepath.Join(s.Dir, "current")
	if err := atomicfile.Write(p, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Fail(true)
	err := atomicfile.Write(p, []byte("new\n"), 0o600)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("write on a failing disk: %v, want EIO", err)
	}
	s.Fail(false)
	if b, err := os.ReadFile(p); err != nil || string(b) != "old\n" {
		t.Fatalf("after a failed write: %q, %v; want the old content", b, err)
	}
	assertOnly(t, s.Backing, "current")
}

func TestWriteMissingDirectory(t *testing.T) {
	err := atomicfile.Write(filepath.Join(t.TempDir(), "no", "file"), []byte("x"), 0o600)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

// assertOnly checks that dir holds exactly the named entries.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}
