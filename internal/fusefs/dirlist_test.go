package fusefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestListings checks directory listings served without OPENDIR (the
// kernel asks READDIR by offset; dirlist.go keeps a handle per listing):
// long listings come whole and once, concurrent and interleaved listings
// of one directory each come whole, a listing that starts over sees the
// changes made meanwhile, more unfinished listings than are kept do not
// mix, and fsync of a directory works without a handle.
func TestListings(t *testing.T) {
	f := mountVault(t, "sqlite", false)
	dir := filepath.Join(f.Mnt, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 2000 { // many READDIR replies of 4 KiB
		name := fmt.Sprintf("a-rather-long-file-name-to-fill-the-pages-%04d", i)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	list := func(d string) ([]string, error) {
		ents, err := os.ReadDir(d)
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		return names, err
	}
	check := func(what string, want []string) {
		t.Helper()
		got, err := list(dir)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d names, want %d (first %q)", what, len(got), len(want), got[:min(len(got), 3)])
		}
	}
	check("a long listing", want)

	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				got, err := list(dir)
				if err == nil && !slices.Equal(got, want) {
					err = fmt.Errorf("a concurrent listing got %d names", len(got))
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	// Interleaved: two open listings of one directory, read in turns.
	d1, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	d2, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	var got1, got2 []string
	for {
		n1, err1 := d1.Readdirnames(100)
		n2, err2 := d2.Readdirnames(150)
		got1, got2 = append(got1, n1...), append(got2, n2...)
		if err1 != nil && err2 != nil {
			break
		}
	}
	slices.Sort(got1)
	slices.Sort(got2)
	if !slices.Equal(got1, want) || !slices.Equal(got2, want) {
		t.Fatalf("interleaved listings: %d and %d names, want %d", len(got1), len(got2), len(want))
	}

	// Changes, then a fresh listing.
	for _, name := range want[:100] {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "zz-new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want = append(slices.Clone(want[100:]), "zz-new")
	check("after changes", want)

	// More unfinished listings than are kept.
	var dirs []*os.File
	for i := range 100 {
		d := filepath.Join(f.Mnt, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint(j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		h, err := os.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, h)
		if _, err := h.Readdirnames(1); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range dirs {
		rest, err := h.Readdirnames(-1)
		h.Close()
		if err != nil || len(rest) != 2 {
			t.Errorf("d%03d: the rest of its listing is %q (%v), want 2 names", i, rest, err)
		}
	}

	h, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Sync(); err != nil {
		t.Errorf("fsync of a directory: %v", err)
	}
}
