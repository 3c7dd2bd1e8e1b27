package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// engineNames are the engines every model test runs on.
var engineNames = []string{"mem", "sqlite", "bolt"}

// fixture is a vault under test plus the home that holds it.
type fixture struct {
	t    *testing.T
	home *registry.Home // nil for the memory engine
	v    *vfs.Vault
}

// newVault makes an empty vault on engine and checks it with fsck when the
// test ends.
func newVault(t *testing.T, engine string) *fixture {
	t.Helper()
	f := &fixture{t: t}
	var err error
	if engine == "mem" {
		f.v, err = vfs.Create(engines.NewMemory(), "test", vfs.Quota{})
	} else {
		f.home, err = registry.Open(t.TempDir())
		if err == nil {
			f.v, err = f.home.Create("test", registry.CreateOptions{Engine: engine})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkFsck(t, f.v)
		f.v.Close()
	})
	return f
}

func checkFsck(t *testing.T, v *vfs.Vault) {
	t.Helper()
	r, err := v.Fsck()
	if err != nil {
		t.Errorf("fsck: %v", err)
		return
	}
	if !r.OK() {
		t.Errorf("fsck of %s found problems:\n%s", v.Name(), strings.Join(r.Problems, "\n"))
	}
}

func forEachEngine(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range engineNames {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

func (f *fixture) update(fn func(tx *vfs.Tx) error) {
	f.t.Helper()
	if err := f.v.Update(fn); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) write(p, content string) {
	f.t.Helper()
	f.update(func(tx *vfs.Tx) error {
		d, _ := vfs.SplitPath(p)
		if _, err := tx.MkdirAll(d, 0o755); err != nil {
			return err
		}
		_, err := tx.WriteFile(p, []byte(content), 0o644)
		return err
	})
}

func (f *fixture) read(p string) string {
	f.t.Helper()
	return readIn(f.t, f.v, "", p)
}

func readIn(t *testing.T, v *vfs.Vault, checkpoint, p string) string {
	t.Helper()
	var out []byte
	run := v.View
	if checkpoint != "" {
		run = func(fn func(*vfs.Tx) error) error { return v.ViewAt(checkpoint, fn) }
	}
	err := run(func(tx *vfs.Tx) (err error) {
		out, err = tx.ReadFile(p)
		return err
	})
	if errs.Is(err, errs.NotFound) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestFileOperations(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/a/b/hello.txt", "hello")
		if got := f.read("a/b/hello.txt"); got != "hello" {
			t.Fatalf("read = %q", got)
		}
		f.write("/a/b/hello.txt", "bye")
		if got := f.read("/a/b/hello.txt"); got != "bye" {
			t.Fatalf("after rewrite read = %q", got)
		}
		// Writes at any offset, across chunk boundaries, with a hole before.
		f.update(func(tx *vfs.Tx) error {
			a, err := tx.WriteFile("/big", nil, 0o600)
			if err != nil {
				return err
			}
			data := bytes.Repeat([]byte("x"), vfs.ChunkSize+10)
			if _, err := tx.Write(a.Ino, 3*vfs.ChunkSize-5, data); err != nil {
				return err
			}
			got := make([]byte, 4*vfs.ChunkSize+100)
			n, err := tx.Read(a.Ino, 0, got)
			if err != nil {
				return err
			}
			if n != 4*vfs.ChunkSize+5 {
				return fmt.Errorf("read %d bytes, want %d", n, 4*vfs.ChunkSize+5)
			}
			for i := 0; i < n; i++ {
				want := byte(0)
				if i >= 3*vfs.ChunkSize-5 {
					want = 'x'
				}
				if got[i] != want {
					return fmt.Errorf("byte %d = %q, want %q", i, got[i], want)
				}
			}
			// Shrink into the middle of a chunk, then extend: the cut part reads as zeros.
			size := uint64(3*vfs.ChunkSize - 2)
			if _, err := tx.SetAttr(a.Ino, vfs.SetAttr{Size: &size}); err != nil {
				return err
			}
			size = 4 * vfs.ChunkSize
			if _, err := tx.SetAttr(a.Ino, vfs.SetAttr{Size: &size}); err != nil {
				return err
			}
			tail := make([]byte, 8)
			if _, err := tx.Read(a.Ino, 3*vfs.ChunkSize-4, tail); err != nil {
				return err
			}
			if !bytes.Equal(tail, []byte{'x', 'x', 0, 0, 0, 0, 0, 0}) {
				return fmt.Errorf("after shrink and extend read %q", tail)
			}
			return nil
		})
	})
}

func TestErrorsAreErrnoShaped(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/d/file", "x")
		f.update(func(tx *vfs.Tx) error {
			_, err := tx.Mkdir(vfs.RootIno, "loop", 0o755, 0, 0)
			if err != nil {
				return err
			}
			if _, err := tx.Symlink(vfs.RootIno, "self", "self", 0, 0); err != nil {
				return err
			}
			_, err = tx.Symlink(vfs.RootIno, "escape", "../../../d/file", 0, 0)
			return err
		})
		d := func(tx *vfs.Tx) vfs.Ino { a, _ := tx.Resolve("/d", true); return a.Ino }
		cases := []struct {
			name  string
			op    func(tx *vfs.Tx) error
			errno syscall.Errno
			kind  errs.Kind
		}{
			{"missing", func(tx *vfs.Tx) error { _, err := tx.Resolve("/nope", true); return err }, syscall.ENOENT, errs.NotFound},
			{"exists", func(tx *vfs.Tx) error { _, err := tx.Mkdir(vfs.RootIno, "d", 0o755, 0, 0); return err }, syscall.EEXIST, errs.AlreadyExists},
			{"notdir", func(tx *vfs.Tx) error { _, err := tx.Resolve("/d/file/x", true); return err }, syscall.ENOTDIR, errs.NotADirectory},
			{"isdir", func(tx *vfs.Tx) error { return tx.Unlink(vfs.RootIno, "d") }, syscall.EISDIR, errs.NotAFile},
			{"notempty", func(tx *vfs.Tx) error { return tx.Rmdir(vfs.RootIno, "d") }, syscall.ENOTEMPTY, errs.NotEmpty},
			{"toolong", func(tx *vfs.Tx) error {
				_, err := tx.Create(vfs.RootIno, strings.Repeat("n", 256), 0o644, 0, 0)
				return err
			}, syscall.ENAMETOOLONG, errs.NameTooLong},
			{"loop", func(tx *vfs.Tx) error { _, err := tx.Resolve("/self", true); return err }, syscall.ELOOP, errs.TooManyLinks},
			{"into itself", func(tx *vfs.Tx) error { return tx.Rename(vfs.RootIno, "d", d(tx), "sub", 0) }, syscall.EINVAL, errs.InvalidPath},
			{"noreplace", func(tx *vfs.Tx) error { return tx.Rename(vfs.RootIno, "loop", vfs.RootIno, "d", vfs.RenameNoReplace) }, syscall.EEXIST, errs.AlreadyExists},
			{"escape path", func(tx *vfs.Tx) error { _, err := tx.Resolve("/../etc/passwd", true); return err }, syscall.EINVAL, errs.InvalidPath},
			{"bad name", func(tx *vfs.Tx) error { _, err := tx.Create(vfs.RootIno, "a/b", 0o644, 0, 0); return err }, syscall.EINVAL, errs.InvalidPath},
			{"no xattr", func(tx *vfs.Tx) error { _, err := tx.GetXattr(vfs.RootIno, "user.x"); return err }, syscall.ENODATA, errs.NotFound},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := f.v.Update(c.op)
				if c.errno != 0 && !errors.Is(err, c.errno) {
					t.Fatalf("err = %v, want errno %v", err, c.errno)
				}
				if c.kind != errs.IoError && errs.KindOf(err) != c.kind {
					t.Fatalf("kind = %s, want %s (%v)", errs.KindOf(err), c.kind, err)
				}
			})
		}
		// A symlink's ".." stops at the vault root: it cannot leave the vault.
		if got := f.read("/escape"); got != "x" {
			t.Fatalf("escape symlink read %q, want the vault's /d/file", got)
		}
	})
}

func TestRenameAndLinks(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/src/a", "A")
		f.write("/src/b", "B")
		f.write("/dst/keep", "K")
		f.update(func(tx *vfs.Tx) error {
			src, _ := tx.Resolve("/src", true)
			dst, _ := tx.Resolve("/dst", true)
			a, _ := tx.Resolve("/src/a", true)
			if _, err := tx.Link(a.Ino, dst.Ino, "a-link"); err != nil {
				return err
			}
			if err := tx.Rename(src.Ino, "b", src.Ino, "a", 0); err != nil { // replace
				return err
			}
			if err := tx.Rename(src.Ino, "a", dst.Ino, "keep", vfs.RenameExchange); err != nil {
				return err
			}
			if err := tx.Rename(vfs.RootIno, "src", dst.Ino, "moved", 0); err != nil {
				return err
			}
			got, _ := tx.Resolve("/dst/a-link", true)
			if got.Nlink != 1 {
				return fmt.Errorf("nlink of the replaced file's other name = %d, want 1", got.Nlink)
			}
			return nil
		})
		for p, want := range map[string]string{"/dst/keep": "B", "/dst/moved/a": "K", "/dst/a-link": "A", "/src/a": "<missing>"} {
			if got := f.read(p); got != want {
				t.Errorf("%s = %q, want %q", p, got, want)
			}
		}
	})
}

func TestXattrs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/f", "x")
		f.update(func(tx *vfs.Tx) error {
			a, _ := tx.Resolve("/f", true)
			if err := tx.SetXattr(a.Ino, "user.empty", nil, vfs.XattrCreate); err != nil {
				return err
			}
			if err := tx.SetXattr(a.Ino, "user.k", []byte("v"), 0); err != nil {
				return err
			}
			if err := tx.SetXattr(a.Ino, "user.k", []byte("v"), vfs.XattrCreate); !errors.Is(err, syscall.EEXIST) {
				return fmt.Errorf("create over existing: %v", err)
			}
			names, err := tx.ListXattr(a.Ino)
			if err != nil || !slices.Equal(names, []string{"user.empty", "user.k"}) {
				return fmt.Errorf("list = %v, %v", names, err)
			}
			return tx.RemoveXattr(a.Ino, "user.k")
		})
		f.update(func(tx *vfs.Tx) error {
			a, _ := tx.Resolve("/f", true)
			v, err := tx.GetXattr(a.Ino, "user.empty")
			if err != nil || len(v) != 0 {
				return fmt.Errorf("empty value = %q, %v", v, err)
			}
			_, err = tx.GetXattr(a.Ino, "user.k")
			if !errors.Is(err, syscall.ENODATA) {
				return fmt.Errorf("removed xattr: %v", err)
			}
			return nil
		})
	})
}

func TestCopyDataSharesChunks(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		big := strings.Repeat("0123456789abcdef", vfs.ChunkSize/8) // two chunks
		f.write("/src", big+"tail")
		f.write("/dst", "old content")
		f.update(func(tx *vfs.Tx) error {
			s, _ := tx.Resolve("/src", true)
			d, _ := tx.Resolve("/dst", true)
			return tx.CopyData(s.Ino, d.Ino)
		})
		if got := f.read("/dst"); got != big+"tail" {
			t.Fatalf("copy holds %d bytes, want %d", len(got), len(big)+4)
		}
		f.write("/src", "changed")
		if got := f.read("/dst"); got != big+"tail" {
			t.Fatal("changing the source changed the copy")
		}
	})
}

func TestCheckpointNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "v1.2-rc_3": true, "_x": true, strings.Repeat("n", 128): true,
		"": false, "-x": false, ".x": false, "a/b": false, "a b": false, strings.Repeat("n", 129): false, "é": false,
	} {
		if err := vfs.CheckName("checkpoint", name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
