package mountd_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestControl drives the control socket of a real mount whose home path
// is too long for a socket address: an op sees every write made through
// the mount (buffered data and the open batch included), typed errors
// come back typed, unknown ops are refused, and the socket goes with the
// mount.
func TestControl(t *testing.T) {
	canMount(t)
	dir := filepath.Join(t.TempDir(), strings.Repeat("long-home-", 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	h, err := registry.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Create("ctl", registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	read := func(v *vfs.Vault, raw json.RawMessage) (any, error) {
		var p string
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		var out []byte
		err := v.View(func(tx *vfs.Tx) (err error) {
			out, err = tx.ReadFile(p)
			return err
		})
		return string(out), err
	}
	typed := &errs.Error{Kind: errs.QuotaExceeded, Op: "write", Path: "/f", Vault: "ctl", Err: errors.New("over the quota"),
		Hint: "raise the quota", Extra: map[string]any{"limit": float64(5)}}
	fail := func(*vfs.Vault, json.RawMessage) (any, error) { return nil, typed }
	s := mountd.New(mountd.Options{Home: h, Vault: "ctl", Mountpoint: t.TempDir(), Log: logWriter{T: t},
		Control: map[string]mountd.ControlFunc{"read": read, "fail": fail}})
	if err := s.Mount(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountEventually(t, s) })
	mnt := s.Mountpoint()

	// Written, not fsync'd: in the write-back cache and the open batch.
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("through the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := mountd.Call(h, mnt, "read", "/f", &got); err != nil || got != "through the mount" {
		t.Fatalf("read through the control socket: %q, %v", got, err)
	}
	if err := mountd.Call(h, mnt, "read", "/missing", &got); !errs.Is(err, errs.NotFound) {
		t.Errorf("op failing in the server: %v, want NotFound", err)
	}
	// A typed error arrives whole: every field, and the same message.
	err = mountd.Call(h, mnt, "fail", nil, nil)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != typed.Kind || e.Op != typed.Op || e.Path != typed.Path || e.Vault != typed.Vault ||
		e.Hint != typed.Hint || e.Extra["limit"] != float64(5) || err.Error() != typed.Error() {
		t.Errorf("typed error across the socket: %#v (%v), want %#v (%v)", e, err, typed, typed)
	}
	if err := mountd.Call(h, mnt, "no-such-op", nil, nil); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("unknown op: %v, want InvalidInput", err)
	}
	if err := mountd.Call(h, mnt, "flush", map[string]bool{"sync": true}, nil); err != nil {
		t.Errorf("flush: %v", err)
	}

	if err := s.Unmount(false); err != nil {
		t.Fatal(err)
	}
	if err := mountd.Call(h, mnt, "flush", nil, nil); !errors.Is(err, mountd.ErrNoControl) {
		t.Errorf("after unmount: %v, want ErrNoControl", err)
	}
	sock, _ := mountrec.SocketPath(h, mnt)
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// TestBatchCommits checks that changes made through the mount reach other
// readers of the vault within a few batch periods, without any fsync.
func TestBatchCommits(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	if err := os.Mkdir(filepath.Join(f.Mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := f.Home.Open(f.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := v.View(func(tx *vfs.Tx) error {
			_, err := tx.Resolve("/d", false)
			return err
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mkdir never reached the vault: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
