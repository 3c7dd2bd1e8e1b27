package avfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentvfs/agentvfs/avfs"
)

// TestFS: a vault's states are io/fs file systems that pass
// testing/fstest.TestFS — the working state, and a checkpoint after later
// edits, which still reads as it was saved.
func TestFS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newTestHome(t)
	v := newVault(t, h, "fs")
	big := bytes.Repeat([]byte("0123456789abcdef"), 9000) // over two 64 KiB chunks
	for _, step := range []error{
		v.MkdirAll(ctx, "/src/pkg", 0o755),
		v.MkdirAll(ctx, "/empty", 0o700),
		v.WriteFile(ctx, "/README.md", []byte("# hello\n"), 0o644),
		v.WriteFile(ctx, "/src/main.go", []byte("package main\n"), 0o600),
		v.WriteFile(ctx, "/src/pkg/big.bin", big, 0o644),
		v.WriteFile(ctx, "/src/pkg/empty.txt", nil, 0o644),
		v.Symlink(ctx, "main.go", "/src/link"),        // relative
		v.Symlink(ctx, "/src/pkg", "/pkglink"),        // absolute: from the vault's root
		v.Symlink(ctx, "../README.md", "/src/readme"), // up a level
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	before := []string{"README.md", "empty", "pkglink", "src", "src/link", "src/main.go", "src/pkg",
		"src/pkg/big.bin", "src/pkg/empty.txt", "src/readme"}
	start := time.Now()
	if err := fstest.TestFS(v.FS(), before...); err != nil {
		t.Fatal(err)
	}
	t.Logf("TestFS of the working state: %s", time.Since(start))
	if _, err := v.SaveCheckpoint(ctx, "saved", ""); err != nil {
		t.Fatal(err)
	}

	// Later edits: a change, a deletion, an addition.
	for _, step := range []error{
		v.WriteFile(ctx, "/README.md", []byte("# changed\n"), 0o644),
		func() error { _, err := v.RemoveAll(ctx, "/src/pkg"); return err }(),
		v.WriteFile(ctx, "/NEW", []byte("new"), 0o644),
		v.Remove(ctx, "/pkglink"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	at, err := v.FSAt(ctx, "saved")
	if err != nil {
		t.Fatal(err)
	}
	defer at.Close()
	if at.Ref() != "vault:fs@saved" {
		t.Errorf("Ref = %q", at.Ref())
	}
	start = time.Now()
	if err := fstest.TestFS(at, before...); err != nil {
		t.Fatal(err)
	}
	t.Logf("TestFS of the checkpoint: %s", time.Since(start))
	if b, err := fs.ReadFile(at, "README.md"); err != nil || string(b) != "# hello\n" {
		t.Errorf("README.md at the checkpoint: %q, %v", b, err)
	}
	if b, err := fs.ReadFile(at, "pkglink/big.bin"); err != nil || !bytes.Equal(b, big) {
		t.Errorf("big.bin through the symlink at the checkpoint: %d bytes, %v", len(b), err)
	}
	if err := fstest.TestFS(v.FS(), "NEW", "README.md", "src/main.go", "src/link", "src/readme"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(v.FS(), "src/pkg"); !errors.Is(err, fs.ErrNotExist) || !avfs.IsKind(err, avfs.NotFound) {
		t.Errorf("a deleted dir: %v, want fs.ErrNotExist and NotFound", err)
	}
	if err := v.Symlink(ctx, "src/pkg", "/dangling"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(v.FS(), "dangling"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dangling symlink: %v, want fs.ErrNotExist", err)
	}
	if fi, err := fs.Lstat(v.FS(), "dangling"); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("Lstat of the dangling symlink: %v, %v", fi, err)
	}

	// The same checkpoint by its other REFs; a REF to nothing fails typed.
	for _, ref := range []string{"vault:fs@saved"} {
		f, err := v.FSAt(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := fs.ReadFile(f, "src/pkg/empty.txt"); err != nil || len(b) != 0 {
			t.Errorf("%s: %q, %v", ref, b, err)
		}
		f.Close()
	}
	if f, err := v.FSAt(ctx, "@"); err != nil || f.Ref() != "vault:fs" {
		t.Errorf("FSAt(@) = %v, %v", f, err)
	}
	other := newVault(t, h, "other")
	if err := other.WriteFile(ctx, "/o", []byte("other's"), 0o644); err != nil {
		t.Fatal(err)
	}
	of, err := v.FSAt(ctx, "vault:other")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(of, "o"); err != nil || string(b) != "other's" {
		t.Errorf("vault:other: %q, %v", b, err)
	}
	of.Close()
	_, err = v.FSAt(ctx, "nope")
	wantKind(t, err, avfs.CheckpointNotFound)
	_, err = v.FSAt(ctx, "vault:nope")
	wantKind(t, err, avfs.VaultNotFound)
	_, err = v.FSAt(ctx, "run:../x")
	wantKind(t, err, avfs.InvalidInput)
	if _, err := v.FS().Open("/README.md"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("an absolute name: %v, want fs.ErrInvalid", err)
	}
}

// TestFSOpenFileIsOneVersion: a file of the working state opened before a
// write reads the content it had at Open, whole, never a mix.
func TestFSOpenFileIsOneVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newTestHome(t)
	v := newVault(t, h, "one")
	old := bytes.Repeat([]byte("a"), 200<<10)
	if err := v.WriteFile(ctx, "/f", old, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := v.FS().Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(f, head); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(ctx, "/f", bytes.Repeat([]byte("b"), 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(head, rest...); !bytes.Equal(got, old) {
		t.Errorf("read %d bytes across a write, %d of them 'b'", len(got), bytes.Count(got, []byte("b")))
	}
}
