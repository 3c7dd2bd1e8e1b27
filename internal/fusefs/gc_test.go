package fusefs_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestOverwritesThroughMountStayBounded rewrites random ranges of a 4 MiB
// file through a mount, with an fsync every 50 writes, until about 250 MiB
// of chunks were persisted, and requires the vault's files to stay within
// twice the live data plus 64 MiB all along: the mount's background
// collection frees what the overwrites left. The cleanup's fsck checks
// that it freed nothing still mapped.
func TestOverwritesThroughMountStayBounded(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			f := mountVault(t, engine, false)
			vaultFile := f.Home.Path(f.Name)
			size := func() int64 {
				var n int64
				for _, p := range []string{vaultFile, vaultFile + "-wal"} {
					if fi, err := os.Stat(p); err == nil {
						n += fi.Size()
					}
				}
				return n
			}
			const fileSize = 4 << 20
			rng := rand.New(rand.NewPCG(3, 4))
			data := make([]byte, fileSize)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			p := filepath.Join(f.Mnt, "big")
			if err := writeSynced(p, data); err != nil {
				t.Fatal(err)
			}
			fd, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fd.Close()
			bound := int64(2*fileSize) + 64<<20
			var peak int64
			for round := range 120 {
				for range 50 {
					n := 16<<10 + rng.IntN(48<<10)
					off := rng.IntN(fileSize - n)
					buf := data[off : off+n]
					for j := range buf {
						buf[j] = byte(rng.Uint32())
					}
					if _, err := fd.WriteAt(buf, int64(off)); err != nil {
						t.Fatal(err)
					}
				}
				if err := fd.Sync(); err != nil {
					t.Fatalf("round %d: fsync: %v", round, err)
				}
				peak = max(peak, size())
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(data) {
				t.Fatal("the file does not read what was written")
			}
			t.Logf("%s: peak %d MiB, bound %d MiB", engine, peak>>20, bound>>20)
			if peak > bound {
				t.Errorf("vault file reached %d MiB, bound %d MiB", peak>>20, bound>>20)
			}
		})
	}
}
