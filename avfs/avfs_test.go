package avfs_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/avfs"
)

func newTestHome(t *testing.T, opts ...avfs.Option) *avfs.Home {
	t.Helper()
	h, err := avfs.OpenHome(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newVault(t *testing.T, h *avfs.Home, name string) *avfs.Vault {
	ctx := t.Context()
	t.Helper()
	v, err := h.Create(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func wantKind(t *testing.T, err error, kind avfs.Kind) {
	t.Helper()
	var e *avfs.Error
	if !errors.As(err, &e) || e.Kind != kind || !avfs.IsKind(err, kind) {
		t.Fatalf("got %v (kind %q), want a %s error", err, avfs.KindOf(err), kind)
	}
}

func TestFiles(t *testing.T) {
	ctx := t.Context()
	t.Parallel()
	h := newTestHome(t)
	v := newVault(t, h, "files")

	wantKind(t, v.WriteFile(ctx, "/a/b.txt", []byte("x"), 0o644), avfs.NotFound)
	if err := v.MkdirAll(ctx, "/a/b/c", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(ctx, "a/f.txt", []byte("hello"), 0o600); err != nil { // relative: from the root
		t.Fatal(err)
	}
	if err := v.WriteFile(ctx, "/a/f.txt", []byte("hi"), 0o777); err != nil { // replaces; keeps the mode
		t.Fatal(err)
	}
	if b, err := v.ReadFile(ctx, "/a/f.txt"); err != nil || string(b) != "hi" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	ents, err := v.ReadDir(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 || ents[0].Name != "b" || !ents[0].IsDir() || ents[0].Mode != 0o750 ||
		ents[1].Name != "f.txt" || ents[1].Type != "file" || ents[1].Size != 2 || ents[1].Mode != 0o600 {
		t.Fatalf("ReadDir = %+v", ents)
	}
	if fi, err := v.Stat(ctx, "/"); err != nil || fi.Name != "/" || !fi.IsDir() {
		t.Fatalf("Stat(/) = %+v, %v", fi, err)
	}
	if fi, err := v.Stat(ctx, "/a/f.txt"); err != nil || fi.Name != "f.txt" || fi.ModTime.IsZero() || fi.ModTime.Location().String() != "UTC" {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	_, err = v.ReadDir(ctx, "/a/f.txt")
	wantKind(t, err, avfs.NotADirectory)
	_, err = v.ReadFile(ctx, "/a")
	wantKind(t, err, avfs.NotAFile)
	_, err = v.ReadFile(ctx, "/../etc/passwd")
	wantKind(t, err, avfs.InvalidPath)
	wantKind(t, v.Remove(ctx, "/a"), avfs.NotEmpty)
	_, err = v.RemoveAll(ctx, "/")
	wantKind(t, err, avfs.InvalidPath)
	if err := v.Remove(ctx, "/a/f.txt"); err != nil {
		t.Fatal(err)
	}
	// Copy is cp -r; Move is mv; both into a directory when dst is one.
	if err := v.WriteFile(ctx, "/a/b/c/deep", []byte("deep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := v.Copy(ctx, "/a/b", "/a/copy"); err != nil || st != (avfs.CopyStats{Files: 1, Dirs: 2, Bytes: 4}) {
		t.Fatalf("Copy = %+v, %v", st, err)
	}
	if b, err := v.ReadFile(ctx, "/a/copy/c/deep"); err != nil || string(b) != "deep" {
		t.Fatalf("the copy: %q, %v", b, err)
	}
	_, err = v.Copy(ctx, "/a", "/a/copy")
	wantKind(t, err, avfs.InvalidInput) // into itself
	if to, err := v.Move(ctx, "/a/copy", "/a/b"); err != nil || to != "/a/b/copy" {
		t.Fatalf("Move = %q, %v", to, err)
	}
	if n, err := v.RemoveAll(ctx, "/a"); err != nil || n != 7 { // a, b, c, deep, copy, copy/c, copy/c/deep
		t.Fatalf("RemoveAll = %d, %v; want 7 names", n, err)
	}
	if n, err := v.RemoveAll(ctx, "/a"); err != nil || n != 0 { // gone already: not an error
		t.Fatalf("RemoveAll of a missing path = %d, %v", n, err)
	}
	_, err = v.Stat(ctx, "/a")
	wantKind(t, err, avfs.NotFound)
	if !errors.Is(err, syscall.ENOENT) || !errors.Is(err, avfs.NotFound) || errors.Is(err, avfs.NotEmpty) {
		t.Errorf("%v: errors.Is does not match ENOENT and NotFound alone", err)
	}

	// A call whose ctx has ended does nothing.
	done, cancel := context.WithCancel(ctx)
	cancel()
	wantKind(t, v.WriteFile(done, "/late", []byte("x"), 0o644), avfs.Interrupted)
	if err := v.MkdirAll(done, "/late-dir", 0o755); !errors.Is(err, context.Canceled) {
		t.Errorf("MkdirAll with an ended ctx: %v, want context.Canceled", err)
	}
	if ents, err := v.ReadDir(ctx, "/"); err != nil || len(ents) != 0 {
		t.Errorf("after calls with an ended ctx: %+v, %v", ents, err)
	}
}

func TestVaultsAndCheckpoints(t *testing.T) {
	ctx := t.Context()
	t.Parallel()
	h := newTestHome(t)
	if _, err := h.Current(); !avfs.IsKind(err, avfs.NoActiveVault) {
		t.Fatalf("Current = %v", err)
	}
	v, err := h.Create(ctx, "b1", &avfs.CreateOptions{Backend: "bolt", Quota: avfs.Quota{MaxFiles: 2}})
	if err != nil {
		t.Fatal(err)
	}
	_ = v.WriteFile(ctx, "/1", nil, 0o644)
	_ = v.WriteFile(ctx, "/2", nil, 0o644)
	wantKind(t, v.WriteFile(ctx, "/3", nil, 0o644), avfs.QuotaExceeded)
	v.Close()
	_, err = h.Create(ctx, "b1", nil)
	wantKind(t, err, avfs.VaultExists)
	_, err = h.Create(ctx, "bad/name", nil)
	wantKind(t, err, avfs.InvalidInput)
	if err := h.Use("b1"); err != nil {
		t.Fatal(err)
	}
	if cur, err := h.Current(); err != nil || cur != "b1" {
		t.Fatalf("Current = %q, %v", cur, err)
	}
	infos, err := h.List(ctx)
	if err != nil || len(infos) != 1 || infos[0].Backend != "bolt" || !infos[0].Current {
		t.Fatalf("List = %+v, %v", infos, err)
	}

	v = newVault(t, h, "s")
	wantKind(t, v.RestoreCheckpoint(ctx, "nope"), avfs.CheckpointNotFound)
	wantKind(t, v.DeleteCheckpoint(ctx, "nope"), avfs.CheckpointNotFound)
	_, err = v.Diff(ctx, "nope", "")
	wantKind(t, err, avfs.CheckpointNotFound)
	cp, err := v.SaveCheckpoint(ctx, "", "")
	if err != nil || cp.Name == "" {
		t.Fatalf("SaveCheckpoint = %+v, %v", cp, err)
	}
	_, err = v.SaveCheckpoint(ctx, cp.Name, "")
	wantKind(t, err, avfs.AlreadyExists)
	if err := v.DeleteCheckpoint(ctx, cp.Name); err != nil {
		t.Fatal(err)
	}
	if cps, err := v.Checkpoints(ctx); err != nil || len(cps) != 0 {
		t.Fatalf("Checkpoints = %v, %v", cps, err)
	}

	f, err := h.Fork(ctx, "s", "f")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Fork(ctx, "nope", "g")
	wantKind(t, err, avfs.VaultNotFound)
	// Vaults a fork returns are guarded like opened ones: see TestMount.
	f.Close()
	if err := h.Delete(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, h.Delete(ctx, "f"), avfs.VaultNotFound)
}

func TestBinaryNotFound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := newTestHome(t, avfs.WithBinary(filepath.Join(dir, "missing")))
	newVault(t, h, "v")
	_, err := h.Mount(ctx, "v", dir, nil)
	wantKind(t, err, avfs.BinaryNotFound)
	if !strings.Contains(err.Error(), "WithBinary") {
		t.Errorf("%v does not say where the program was looked for", err)
	}
	if !canMount {
		return // Exec checks FUSE first
	}
	// FUSE needs the program to serve the run's mount (overlay does not).
	_, err = h.Exec(ctx, avfs.ExecRequest{Vault: "v", Argv: []string{"true"}, Transport: avfs.TransportFUSE})
	wantKind(t, err, avfs.BinaryNotFound)

	t.Setenv("AGENTVFS_BIN", dir) // a directory: named, but not a program
	_, err = newTestHome(t).Mount(ctx, "v", dir, nil)
	wantKind(t, err, avfs.BinaryNotFound)

	t.Setenv("AGENTVFS_BIN", "")
	t.Setenv("PATH", dir) // no avfs on PATH, and this test binary is not avfs
	_, err = newTestHome(t).Mount(ctx, "v", dir, nil)
	wantKind(t, err, avfs.BinaryNotFound)
}

func TestMount(t *testing.T) {
	ctx := context.Background()
	needMount(t)
	t.Parallel()
	h := newTestHome(t)
	v := newVault(t, h, "m")
	if err := v.WriteFile(ctx, "/f", []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt1, mnt2 := t.TempDir(), t.TempDir()

	// Errors of the serving process come back typed, with their context
	// and the message the CLI prints.
	_, err := h.Mount(ctx, "nope", mnt1, nil)
	wantKind(t, err, avfs.VaultNotFound)
	if got, want := err.Error(), `vault "nope": no vault named "nope" (list vaults with `+"`avfs vault list`)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	_, err = h.Mount(ctx, "m", filepath.Join(mnt1, "missing"), nil)
	if err == nil {
		t.Fatal("mounted on a missing directory")
	}

	m, err := h.Mount(ctx, "m", mnt1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmount(ctx)
	if m.Vault != "m" || m.PID <= 0 || m.ReadOnly || m.PID == os.Getpid() {
		t.Errorf("Mount = %+v", m)
	}
	_, err = h.Mount(ctx, "m", mnt2, nil)
	wantKind(t, err, avfs.VaultLocked)
	var e *avfs.Error
	if errors.As(err, &e) && e.Extra["mountpoint"] != m.Mountpoint {
		t.Errorf("VaultLocked names %v, want %s", e.Extra["mountpoint"], m.Mountpoint)
	}
	ro, err := h.Mount(ctx, "m", mnt2, &avfs.MountOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ro.Mountpoint, "f")); err != nil || string(b) != "data" {
		t.Errorf("read through the read-only mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(ro.Mountpoint, "g"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write through the read-only mount: %v", err)
	}
	mounts, err := h.Mounts(ctx)
	if err != nil || len(mounts) != 2 || !mounts[0].Live {
		t.Errorf("Mounts = %+v, %v", mounts, err)
	}

	// The mount is the only writer, also for a fork's vault handle.
	wantKind(t, v.WriteFile(ctx, "/x", nil, 0o644), avfs.VaultLocked)
	if _, err := v.SaveCheckpoint(ctx, "beside", ""); err != nil { // checkpoints go on
		t.Fatal(err)
	}
	// A vault opened beside the mount sees what was just written through
	// it, still in the mount's write-back cache (no fsync).
	if err := os.WriteFile(filepath.Join(m.Mountpoint, "fresh"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	beside, err := h.Open(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := beside.ReadFile(ctx, "/fresh"); err != nil || string(b) != "new" {
		t.Errorf("read beside the mount: %q, %v; want \"new\"", b, err)
	}
	beside.Close()

	// A file held open keeps the mount busy.
	f, err := os.Open(filepath.Join(m.Mountpoint, "f"))
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, m.Unmount(ctx), avfs.MountBusy)
	f.Close()
	for _, mm := range []*avfs.Mount{m, ro} {
		if err := mm.Unmount(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantKind(t, m.Unmount(ctx), avfs.NotMounted)
	if err := v.WriteFile(ctx, "/x", nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	needMount(t)
	t.Parallel()
	h := newTestHome(t)
	_, err := h.Exec(ctx, avfs.ExecRequest{Argv: []string{"true"}})
	wantKind(t, err, avfs.NoActiveVault) // an empty home has no current vault
	v := newVault(t, h, "e")             // the first vault becomes current
	env, err := h.Exec(ctx, avfs.ExecRequest{Vault: "nope", Argv: []string{"true"}})
	wantKind(t, err, avfs.VaultNotFound)
	if env != nil {
		t.Errorf("a refused request has an envelope: %+v", env)
	}
	_, err = h.Exec(ctx, avfs.ExecRequest{Vault: "e"})
	wantKind(t, err, avfs.InvalidInput)

	if err := h.Use("e"); err != nil {
		t.Fatal(err)
	}
	env, err = h.Exec(ctx, avfs.ExecRequest{Shell: "echo $X > out; exit 3", Env: []string{"X=42"}, Timeout: avfs.NoTimeout,
		Checkpoint: avfs.CheckpointNever, Stdin: strings.NewReader("ignored")})
	if err != nil {
		t.Fatal(err)
	}
	r := env.Result
	if r.State != avfs.StateCompleted || *r.ExitCode != 3 || env.Success || env.Request.Timeout != 0 ||
		r.Checkpoint == nil || r.Checkpoint.Kept || r.Decision.Action != avfs.AllowWithCheckpoint {
		t.Errorf("envelope: %+v", env)
	}
	if b, err := v.ReadFile(ctx, "/out"); err != nil || string(b) != "42\n" {
		t.Errorf("/out = %q, %v", b, err)
	}
	if cps, _ := v.Checkpoints(ctx); len(cps) != 0 {
		t.Errorf("--checkpoint never kept %v", cps)
	}

	env, err = h.Exec(ctx, avfs.ExecRequest{Vault: "e", Argv: []string{"curl", "https://example.com"}})
	if err != nil || env.Result.State != avfs.StateAwaitingApproval {
		t.Fatalf("curl: %+v, %v", env, err)
	}
	if env, err = h.Reject(ctx, env.ID); err != nil || env.Result.Approval.Status != avfs.StatusRejected {
		t.Fatalf("Reject: %+v, %v", env, err)
	}
	_, err = h.Exec(ctx, avfs.ExecRequest{Vault: "e", Approval: env.ID})
	wantKind(t, err, avfs.ApprovalRejected)

	var out, errOut bytes.Buffer // live copies of the output, whole; the envelope keeps MaxOutput
	env, err = h.Exec(ctx, avfs.ExecRequest{Vault: "e", Argv: []string{"sh", "-c", "echo 2 > two; echo out-12345; echo err >&2"},
		Stdout: &out, Stderr: &errOut, MaxOutput: 4}) // zero Timeout: DefaultTimeout
	if err != nil || env.Request.Timeout != 5*time.Minute {
		t.Fatalf("run: %+v, %v", env, err)
	}
	if out.String() != "out-12345\n" || errOut.String() != "err\n" || env.Result.Stdout != "out-" || !env.Result.StdoutTruncated {
		t.Errorf("live output %q %q, envelope's %q", out.String(), errOut.String(), env.Result.Stdout)
	}
	// run:ID and run:ID^after are the states around the run.
	if cs, err := v.Diff(ctx, "run:"+env.ID, "run:"+env.ID+"^after"); err != nil || !slices.Equal(changed(cs), []string{"added /two"}) {
		t.Errorf("the run's diff by REF: %v, %v", changed(cs), err)
	}
	if f, err := v.FSAt(ctx, "run:"+env.ID+"^after"); err != nil {
		t.Error(err)
	} else if b, err := fs.ReadFile(f, "two"); err != nil || string(b) != "2\n" {
		t.Errorf("two after the run: %q, %v", b, err)
	}
	u, err := h.Undo(ctx, "", env.ID)
	if err != nil || u.Vault != "e" || !slices.Equal(u.Undone, []string{env.ID}) {
		t.Fatalf("Undo = %+v, %v", u, err)
	}
	_, err = v.Stat(ctx, "/two")
	wantKind(t, err, avfs.NotFound)
	rd, err := h.Redo(ctx, "", "")
	if err != nil || rd.Run != env.ID || rd.Vault != "e" {
		t.Fatalf("Redo = %+v, %v", rd, err)
	}
	if b, err := v.ReadFile(ctx, "/two"); err != nil || string(b) != "2\n" {
		t.Errorf("/two after Redo = %q, %v", b, err)
	}
	_, err = h.Redo(ctx, "e", env.ID)
	wantKind(t, err, avfs.Conflict)
}

// A write the quota refuses changes nothing: the file keeps its content,
// a new file is not made.
func TestRefusedWriteChangesNothing(t *testing.T) {
	ctx := t.Context()
	h := newTestHome(t)
	v, err := h.Create(ctx, "q", &avfs.CreateOptions{Quota: avfs.Quota{MaxFileSizeMB: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.WriteFile(ctx, "/f", []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20)
	wantKind(t, v.WriteFile(ctx, "/f", big, 0o644), avfs.QuotaExceeded)
	wantKind(t, v.WriteFile(ctx, "/new", big, 0o644), avfs.QuotaExceeded)
	if b, err := v.ReadFile(ctx, "/f"); err != nil || string(b) != "old" {
		t.Errorf("/f after the refused write: %q, %v", b, err)
	}
	_, err = v.Stat(ctx, "/new")
	wantKind(t, err, avfs.NotFound)
}
