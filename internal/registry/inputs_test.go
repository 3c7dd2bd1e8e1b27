package registry_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// within runs fn and fails the test when it has not returned after d: the
// old code blocked forever opening a FIFO.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s still blocked after %v", what, d)
	}
}

// mkfifo makes a FIFO at p and, at cleanup, opens it for writing once so a
// reader the code under test left blocked on it is let go.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
}

func TestFIFOVaultFileIsRefused(t *testing.T) {
	h := newHome(t)
	v, err := h.Create("good", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	mkfifo(t, h.Path("pipe"))
	within(t, 5*time.Second, "open of a FIFO vault", func() {
		_, err := h.Open("pipe")
		if !errs.Is(err, errs.CorruptVault) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("open of a FIFO: %v (kind %s)", err, errs.KindOf(err))
		}
	})
	within(t, 5*time.Second, "vault list beside a FIFO", func() {
		if _, err := h.List(); !errs.Is(err, errs.CorruptVault) {
			t.Errorf("list beside a FIFO: %v", err)
		}
	})
	if v, err := h.Open("good"); err != nil {
		t.Errorf("a good vault beside the FIFO: %v", err)
	} else {
		v.Close()
	}
}

func TestFIFOCurrentFileIsNoCurrentVault(t *testing.T) {
	h := newHome(t)
	mkfifo(t, filepath.Join(h.Dir, "current"))
	within(t, 5*time.Second, "reading a FIFO current file", func() {
		if _, err := h.Current(); !errs.Is(err, errs.NoActiveVault) {
			t.Errorf("current from a FIFO: %v", err)
		}
	})
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & (os.ModePerm | os.ModeSticky)
}

func TestHomeModes(t *testing.T) {
	t.Run("new home is 0700", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "a", "home")
		h, err := registry.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		if m := mode(t, d); m != 0o700 {
			t.Errorf("new home mode %v", m)
		}
		if m := mode(t, filepath.Join(d, "vaults")); m != 0o700 {
			t.Errorf("new vaults/ mode %v", m)
		}
		if len(h.Warnings) != 0 {
			t.Errorf("warnings for a private home: %q", h.Warnings)
		}
	})
	t.Run("shared directory keeps its mode", func(t *testing.T) {
		d := t.TempDir()
		if err := os.Chmod(d, os.ModeSticky|0o777); err != nil {
			t.Fatal(err)
		}
		h, err := registry.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		if m := mode(t, d); m != 0o777|os.ModeSticky {
			t.Errorf("existing 1777 home changed to %v", m)
		}
		if m := mode(t, filepath.Join(d, "vaults")); m != 0o700 {
			t.Errorf("vaults/ in a shared home: %v", m)
		}
		if len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "writable by others") ||
			!strings.Contains(h.Warnings[0], "1777") {
			t.Errorf("warnings: %q", h.Warnings)
		}
	})
	t.Run("existing 0755 home is left alone, vaults/ set back to 0700", func(t *testing.T) {
		d := t.TempDir()
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(d, "vaults"), 0o755); err != nil {
			t.Fatal(err)
		}
		h, err := registry.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		if m := mode(t, d); m != 0o755 {
			t.Errorf("existing 0755 home changed to %v", m)
		}
		if m := mode(t, filepath.Join(d, "vaults")); m != 0o700 {
			t.Errorf("existing vaults/ left at %v", m)
		}
		if len(h.Warnings) != 0 {
			t.Errorf("warnings: %q", h.Warnings)
		}
	})
	t.Run("a file is not a home", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := registry.Open(f); !errs.Is(err, errs.IoError) {
			t.Errorf("home on a file: %v", err)
		}
		if m := mode(t, f); m != 0o644 {
			t.Errorf("file's mode changed to %v", m)
		}
	})
}
