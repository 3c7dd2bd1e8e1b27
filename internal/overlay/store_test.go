//go:build linux

package overlay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// storeFiles lists the data files of c's store.
func storeFiles(t testing.TB, c *Cache) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(c.storeRoot(), "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// prepareState materializes v's working state (sealed first) into c.
func prepareState(t testing.TB, c *Cache, v *vfs.Vault, l *Lease) Prepared {
	t.Helper()
	_, base, err := standOnFrozen(v)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Prepare(context.Background(), v, base, l)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSharedStoreHoldsDataOnce: in the Shared layout a tree holds sparse
// stubs, each distinct content is one store file, and a second vault of
// the same content writes no data at all; mounts show both states whole.
func TestSharedStoreHoldsDataOnce(t *testing.T) {
	needRoot(t)
	c := newCache(t, Shared)
	src := t.TempDir()
	sampleTree(t, src)
	big, err := os.ReadFile(filepath.Join(src, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "big-copy.bin"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, src, snapOpts{times: true})
	var states []Prepared
	for i := range 2 {
		v, _ := newVault(t, vfs.Quota{})
		importDir(t, v, src)
		var l Lease
		defer l.Release()
		p := prepareState(t, c, v, &l)
		if i == 1 && (p.Stats.Stored != 0 || p.Stats.Reused != int64(2*len(big)+len("hello\n")+len("b")+len("x")+len("#!/bin/sh\n"))) {
			t.Fatalf("second vault of the same content: stats %+v, want nothing stored", p.Stats)
		}
		if d := diffLines(want, snapshotStack(t, p.Lowers, p.Data, snapOpts{times: true})); d != "" {
			t.Fatalf("vault %d through the store differs from its source:\n%s", i, d)
		}
		states = append(states, p)
	}
	// hello (two names of one file), b, x, exec.sh, big twice: 5 contents.
	if n := len(storeFiles(t, c)); n != 5 {
		t.Fatalf("%d store files, want 5", n)
	}
	var st unix.Stat_t
	stub := filepath.Join(states[0].Lowers[0], "big.bin")
	if err := unix.Lstat(stub, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks != 0 || st.Size != int64(len(big)) {
		t.Fatalf("stub: %d blocks, size %d; want a sparse file of %d bytes", st.Blocks, st.Size, len(big))
	}
	if _, err := getXattr(stub, "trusted.overlay.metacopy"); err != nil {
		t.Fatalf("stub without metacopy: %v", err)
	}
}

// TestSharedDropVaultSweepsItsData: dropping a vault's entries frees the
// store files only they named; what another entry names stays readable.
func TestSharedDropVaultSweepsItsData(t *testing.T) {
	needRoot(t)
	c := newCache(t, Shared)
	common, own := t.TempDir(), t.TempDir()
	sampleTree(t, common)
	sampleTree(t, own)
	if err := os.WriteFile(filepath.Join(own, "only-b"), []byte("only in b"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := newVault(t, vfs.Quota{})
	importDir(t, a, common)
	b, _ := newVault(t, vfs.Quota{})
	importDir(t, b, own)
	var la, lb Lease
	pa := prepareState(t, c, a, &la)
	prepareState(t, c, b, &lb)
	la.Release()
	lb.Release()
	n := len(storeFiles(t, c))
	if err := c.DropVault(b.ID(), nil); err != nil {
		t.Fatal(err)
	}
	if got := len(storeFiles(t, c)); got != n-1 {
		t.Fatalf("store files %d → %d after dropping b; want b's own one freed", n, got)
	}
	if d := diffLines(snapshot(t, common, snapOpts{}), snapshotStack(t, pa.Lowers, pa.Data, snapOpts{})); d != "" {
		t.Fatalf("a's entry lost data:\n%s", d)
	}
	// A mount's lease keeps an entry, and so its data, through a Prune.
	var l Lease
	pa = prepareState(t, c, a, &l)
	c.Budget = 1
	if _, err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if got := len(storeFiles(t, c)); got != n-1 {
		t.Fatalf("a leased entry's store files went: %d left", got)
	}
	l.Release()
	if _, err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if got := storeFiles(t, c); len(got) != 0 {
		t.Fatalf("store files left with no entry: %v", got)
	}
}

// TestSharedPruneCountsDataOnce: two entries standing on the same data
// fit a budget that holds it once.
func TestSharedPruneCountsDataOnce(t *testing.T) {
	needRoot(t)
	c := newCache(t, Shared)
	src := t.TempDir()
	sampleTree(t, src)
	for range 2 {
		v, _ := newVault(t, vfs.Quota{})
		importDir(t, v, src)
		var l Lease
		prepareState(t, c, v, &l)
		l.Release()
	}
	ents, err := c.Entries()
	if err != nil || len(ents) != 2 {
		t.Fatalf("entries %v %v", ents, err)
	}
	data := int64(20*vfs.ChunkSize + 123)
	c.Budget = ents[0].Bytes + ents[1].Bytes + data + data/2
	removed, err := c.Prune()
	if err != nil || len(removed) != 0 {
		t.Fatalf("prune removed %v (%v); the data is on disk once and fits", removed, err)
	}
}

// TestSharedCollisionIsACopy: a store name that holds other data (a
// collision of the name's 110 bits) is not used: that file is a whole
// copy in the tree.
func TestSharedCollisionIsACopy(t *testing.T) {
	needRoot(t)
	c := newCache(t, Shared)
	v, _ := newVault(t, vfs.Quota{})
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("the real data"), 0o644); err != nil {
		t.Fatal(err)
	}
	importDir(t, v, src)
	var key [32]byte
	if err := v.View(func(tx *vfs.Tx) error {
		at, err := tx.Resolve("/f", false)
		if err == nil {
			key, err = tx.ContentKey(at.Ino)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	squat := filepath.Join(c.storeRoot(), storeName(key))
	if err := os.MkdirAll(filepath.Dir(squat), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(squat, []byte("other data!!!"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(squat, storeKeyAttr, make([]byte, 32), 0); err != nil {
		t.Fatal(err)
	}
	var l Lease
	defer l.Release()
	p := prepareState(t, c, v, &l)
	if b, err := os.ReadFile(filepath.Join(p.Lowers[0], "f")); err != nil || string(b) != "the real data" {
		t.Fatalf("tree's f: %q %v; want a whole copy", b, err)
	}
	if d := diffLines(snapshot(t, src, snapOpts{}), snapshotStack(t, p.Lowers, p.Data, snapOpts{})); d != "" {
		t.Fatalf("mount differs:\n%s", d)
	}
}

// TestLayoutRefused: an unknown layout, and Shared with user.overlay.*
// markers, are refused before anything is written.
func TestLayoutRefused(t *testing.T) {
	v, _ := newVault(t, vfs.Quota{})
	for _, c := range []*Cache{
		{Root: filepath.Join(t.TempDir(), "c"), Format: Trusted, Layout: "dedup"},
		{Root: filepath.Join(t.TempDir(), "c"), Format: User, Layout: Shared},
	} {
		var l Lease
		if _, err := c.Prepare(context.Background(), v, 1, &l); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("layout %q format %q: %v, want InvalidInput", c.Layout, c.Format, err)
		}
		if _, err := os.Stat(c.Root); !os.IsNotExist(err) {
			t.Errorf("a refused layout made the cache dir: %v", err)
		}
	}
}

// TestIngestMetacopyUpper: an upper mounted with metacopy=on holds a
// sparse metadata-only copy-up after a chmod; ingest takes it as the
// attribute change it is, never as a file of zeros, and refuses one that
// was renamed (its data is not at its name below) changing nothing.
func TestIngestMetacopyUpper(t *testing.T) {
	needRoot(t)
	v, _ := newVault(t, vfs.Quota{})
	src := t.TempDir()
	sampleTree(t, src)
	importDir(t, v, src)
	lower := materializeTo(t, v)
	mountMeta := func() (upper, merged string) {
		dir := t.TempDir()
		upper, work, merged := filepath.Join(dir, "u"), filepath.Join(dir, "w"), filepath.Join(dir, "m")
		for _, d := range []string{upper, work, merged} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",metacopy=on,redirect_dir=on,index=off"
		if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
			t.Skipf("metacopy=on mount: %v", err)
		}
		return upper, merged
	}
	upper, merged := mountMeta()
	err := os.Chmod(filepath.Join(merged, "big.bin"), 0o600)
	Unmount(merged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getXattr(filepath.Join(upper, "big.bin"), "trusted.overlay.metacopy"); err != nil {
		t.Skipf("the kernel copied the whole file up: %v", err)
	}
	if _, err := v.UpdateSealed(func(tx *vfs.Tx) error { _, err := Ingest(tx, upper, Trusted); return err }); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, src, snapOpts{})
	for i, l := range want {
		if strings.HasPrefix(l, "big.bin ") {
			want[i] = strings.Replace(l, " 644 ", " 600 ", 1)
		}
	}
	if d := diffLines(want, snapshot(t, materializeTo(t, v), snapOpts{})); d != "" {
		t.Fatalf("after a metadata-only copy-up the vault differs:\n%s", d)
	}

	before := snapshot(t, materializeTo(t, v), snapOpts{times: true})
	upper, merged = mountMeta()
	err = os.Chmod(filepath.Join(merged, "exec.sh"), 0o700)
	if err == nil {
		err = os.Rename(filepath.Join(merged, "exec.sh"), filepath.Join(merged, "moved.sh"))
	}
	Unmount(merged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getXattr(filepath.Join(upper, "moved.sh"), "trusted.overlay.redirect"); err != nil {
		t.Skipf("no redirect on the renamed metacopy file: %v", err)
	}
	_, err = v.UpdateSealed(func(tx *vfs.Tx) error { _, err := Ingest(tx, upper, Trusted); return err })
	if !errs.Is(err, errs.InvalidInput) {
		t.Fatalf("ingest of a renamed metadata-only copy-up: %v, want InvalidInput", err)
	}
	if d := diffLines(before, snapshot(t, materializeTo(t, v), snapOpts{times: true})); d != "" {
		t.Fatalf("a refused ingest changed the vault:\n%s", d)
	}
}
