package mountrec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestUnescape: mountinfo's octal escapes come back as the bytes they
// stand for; anything else is kept as it is.
func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`:  "/tmp/a b",
		`/tmp/tab\011`: "/tmp/tab\t",
		`/plain`:       "/plain",
		`/back\\slash`: `/back\\slash`,
		`/short\04`:    `/short\04`,
		`/bad\09x`:     `/bad\09x`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzUnescape: unescaping never panics and never lengthens its input.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{`a\040b`, `\`, `\0`, `\777`, `x\\y`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescape(s); len(got) > len(s) {
			t.Fatalf("unescape(%q) = %q, longer", s, got)
		}
	})
}

// TestRecords: a held record is listed live, found by its mountpoint
// and refused a second time; once removed it is gone. A record whose
// holder let go without removing it is stale: listed not live, and
// pruned.
func TestRecords(t *testing.T) {
	h, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "m")
	r, err := Create(h, Info{Vault: "v", Mountpoint: mnt, PID: 1, StartedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := Find(h, mnt); !ok || !in.Live || in.Vault != "v" || in.Transport != FUSE {
		t.Errorf("Find = %+v, %v; want a live record of v served by %s", in, ok, FUSE)
	}
	if _, err := Create(h, Info{Vault: "v", Mountpoint: mnt}); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("a second record at the same place: %v, want AlreadyExists", err)
	}
	r.Remove()
	if _, ok := Find(h, mnt); ok {
		t.Error("a removed record is still found")
	}
	if !WaitGone(h, mnt, time.Second) {
		t.Error("WaitGone of a removed record")
	}

	stale, err := Create(h, Info{Vault: "v", Mountpoint: mnt, PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	stale.f.Close() // the server died: its lock goes, its file stays
	infos, err := List(h)
	if err != nil || len(infos) != 1 || infos[0].Live {
		t.Fatalf("List = %+v, %v; want one stale record", infos, err)
	}
	pruned, err := Prune(h)
	if err != nil || len(pruned) != 1 {
		t.Fatalf("Prune = %+v, %v", pruned, err)
	}
	if infos, _ := List(h); len(infos) != 0 {
		t.Errorf("after Prune: %+v", infos)
	}
}

// TestWriterLock: the writer lock is one per vault; the second comer
// gets VaultLocked naming the holder's mountpoint, and Writer reports the
// holder until it lets go.
func TestWriterLock(t *testing.T) {
	h, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := LockWriter(h, "v", "/mnt/one")
	if err != nil {
		t.Fatal(err)
	}
	if mnt, live := Writer(h, "v"); !live || mnt != "/mnt/one" {
		t.Errorf("Writer = %q, %v", mnt, live)
	}
	_, err = LockWriter(h, "v", "/mnt/two")
	var e *errs.Error
	if !errs.Is(err, errs.VaultLocked) || !asErr(err, &e) || e.Extra["mountpoint"] != "/mnt/one" {
		t.Errorf("second writer: %v, want VaultLocked naming /mnt/one", err)
	}
	l.Release()
	l.Release() // a second release is harmless
	if _, live := Writer(h, "v"); live {
		t.Error("Writer after Release")
	}
	l2, err := LockWriter(h, "v", "/mnt/two")
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
}

func asErr(err error, e **errs.Error) bool {
	te, ok := err.(*errs.Error)
	*e = te
	return ok
}

// TestLockRunsHomeGone: with its home moved away, LockRuns fails with
// ErrHomeGone and makes nothing where the home was; with the home there,
// it makes the lock's dirs and a second holder is refused.
func TestLockRunsHomeGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	h, err := registry.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+"-away"); err != nil {
		t.Fatal(err)
	}
	_, err = LockRuns(h, "v", "test")
	if !errors.Is(err, ErrHomeGone) || !errs.Is(err, errs.NotFound) {
		t.Errorf("LockRuns in a gone home: %v, want ErrHomeGone", err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("LockRuns made the gone home again: %v", err)
	}
	if err := os.Rename(dir+"-away", dir); err != nil {
		t.Fatal(err)
	}
	unlock, err := LockRuns(h, "v", "first")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := LockRuns(h, "v", "second"); !errs.Is(err, errs.VaultLocked) {
		t.Errorf("a second holder: %v, want VaultLocked", err)
	}
}
