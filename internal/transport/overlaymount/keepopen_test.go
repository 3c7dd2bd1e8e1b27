//go:build linux

package overlaymount_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/transport"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestOneRunKeepsTheVaultOpen: a run of one command on a SQLite vault
// opens the vault's file once, at Start, and closes it once, at Close:
// the ingest and the caller's summary (CloseWith's fn) open nothing.
func TestOneRunKeepsTheVaultOpen(t *testing.T) {
	tr, h, dir := newWorkspaceHome(t)
	ctx := context.Background()
	file := h.Path("w")
	ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ino)
	if _, err := unix.InotifyAddWatch(ino, filepath.Dir(file), unix.IN_OPEN|unix.IN_CLOSE); err != nil {
		t.Fatal(err)
	}
	// closes counts the closes of the vault's file since the last call
	// (two opens in a row may show as one event; a close ends each).
	closes := func() int {
		n := 0
		buf := make([]byte, 64<<10)
		for {
			m, err := unix.Read(ino, buf)
			if errors.Is(err, unix.EAGAIN) {
				return n
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= m; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00")
				if string(name) == filepath.Base(file) && ev.Mask&unix.IN_CLOSE != 0 {
					n++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
	ws, err := tr.Start(ctx, transport.Spec{Home: h, Vault: "w", Dir: dir, OneRun: true})
	if err != nil {
		t.Fatal(err)
	}
	closes() // the registry's look at the file's header closes it: not the vault's close
	if err := os.WriteFile(filepath.Join(ws.Dir(), "f"), []byte("x"), 0o644); err != nil {
		_ = ws.Close(ctx)
		t.Fatal(err)
	}
	during := -1
	err = ws.(transport.Finisher).CloseWith(ctx, func(v *vfs.Vault) error {
		during = closes()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != 0 {
		t.Errorf("the vault's file was closed %d times between Start and the summary, want 0: the run keeps it open", during)
	}
	if n := closes(); n == 0 {
		t.Errorf("the vault's file was not closed at Close")
	}
}
