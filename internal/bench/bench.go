// Package bench measures avfs against baselines taken in the same run. It
// reports numbers; it asserts nothing (that is the tests' job).
package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Config is one benchmark run.
type Config struct {
	Dir        string // scratch directory on the native disk
	Counts     []int  // vault sizes in files for the layer benchmarks
	TotalBytes int64  // bytes in the largest vault
	Reps       int    // repetitions; medians are reported
	Out        io.Writer
}

// median runs fn reps times and returns the median duration.
func median(reps int, fn func() error) (time.Duration, error) {
	ds := make([]time.Duration, 0, reps)
	for range reps {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return medianOf(ds), nil
}

// saveAndRestore measures checkpoint save (a new name each time) and the
// restore of the checkpoint "start", medians of reps runs each.
func saveAndRestore(reps int, v *vfs.Vault) (save, restore time.Duration, err error) {
	k := 0
	save, err = median(reps, func() error {
		k++
		_, err := v.SaveCheckpoint(fmt.Sprintf("c%d", k), "")
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	restore, err = median(reps, func() error { return v.RestoreCheckpoint("start") })
	return save, restore, err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// populate fills a vault with n files of size bytes each, in 100 directories,
// with distinct content so that nothing deduplicates.
func populate(v *vfs.Vault, n int, size int64) error {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	buf := make([]byte, size)
	const batch = 500
	for start := 0; start < n; start += batch {
		err := v.Update(func(tx *vfs.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				dir := fmt.Sprintf("/d%02d", i%100)
				d, err := tx.Resolve(dir, true)
				if err != nil {
					if d, err = tx.Mkdir(vfs.RootIno, dir[1:], 0o755, 0, 0); err != nil {
						return err
					}
				}
				for j := 0; j+8 <= len(buf); j += 8 {
					x := rng.Uint64()
					buf[j], buf[j+1], buf[j+2], buf[j+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
					buf[j+4], buf[j+5], buf[j+6], buf[j+7] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
				}
				a, err := tx.Create(d.Ino, fmt.Sprintf("f%06d", i), 0o644, 0, 0)
				if err != nil {
					return err
				}
				if _, err := tx.Write(a.Ino, 0, buf); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Layers measures fork, checkpoint save and checkpoint restore at each
// vault size, against the smallest size.
func Layers(cfg Config, engine string) error {
	maxN := slices.Max(cfg.Counts)
	fileSize := max(cfg.TotalBytes/int64(maxN), 1)
	fmt.Fprintf(cfg.Out, "\n== layers, engine %s (files of %d bytes; median of %d) ==\n", engine, fileSize, cfg.Reps)
	fmt.Fprintf(cfg.Out, "%-10s %-12s %-14s %-14s %-14s\n", "files", "data", "checkpoint", "restore", "fork")
	var base [3]time.Duration
	for i, n := range cfg.Counts {
		home, err := registry.OpenWith(filepath.Join(cfg.Dir, fmt.Sprintf("home-%s-%d", engine, n)), registry.Options{})
		if err != nil {
			return err
		}
		v, err := home.Create("base", registry.CreateOptions{Engine: engine})
		if err != nil {
			return err
		}
		if err := populate(v, n, fileSize); err != nil {
			return err
		}
		if _, err := v.SaveCheckpoint("start", ""); err != nil {
			return err
		}
		// Let the kernel write back the bulk data first: the operations
		// measured are O(1), and an fsync queued behind a gigabyte of dirty
		// pages would measure the disk, not them.
		syscall.Sync()
		save, restore, err := saveAndRestore(cfg.Reps, v)
		if err != nil {
			return err
		}
		f := 0
		fork, err := median(cfg.Reps, func() error {
			f++
			fv, err := home.Fork("base", fmt.Sprintf("fork%d", f))
			if err != nil {
				return err
			}
			return fv.Close()
		})
		if err != nil {
			return err
		}
		v.Close()
		got := [3]time.Duration{save, restore, fork}
		if i == 0 {
			base = got
		}
		cell := func(j int) string {
			return fmt.Sprintf("%s (%.2fx)", ms(got[j]), float64(got[j])/float64(base[j]))
		}
		fmt.Fprintf(cfg.Out, "%-10d %-12s %-14s %-14s %-14s\n", n, human(int64(n)*fileSize), cell(0), cell(1), cell(2))
		if err := os.RemoveAll(home.Dir); err != nil {
			return err
		}
	}
	fmt.Fprintln(cfg.Out, "target: under 10 ms at 100,000 files and no more than 1.5x the 100-file time")
	return nil
}

func human(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// FileIO measures writing and reading files of several sizes and listing a
// directory of 1,000 entries, beside the same work on the native disk and
// the reference implementation's published medians.
func FileIO(cfg Config, engine string) error {
	home, err := registry.OpenWith(filepath.Join(cfg.Dir, "home-io-"+engine), registry.Options{})
	if err != nil {
		return err
	}
	defer os.RemoveAll(home.Dir)
	return fileIO(cfg, home, engine, engine)
}

// fileIO is FileIO in home, labelled label.
func fileIO(cfg Config, home *registry.Home, engine, label string) error {
	v, err := home.Create("io", registry.CreateOptions{Engine: engine})
	if err != nil {
		return err
	}
	defer v.Close()
	native := filepath.Join(cfg.Dir, "native-"+engine)
	if err := os.MkdirAll(native, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(native)

	fmt.Fprintf(cfg.Out, "\n== file I/O, engine %s (median of %d; native = same work on the native disk, with fsync for writes) ==\n", label, cfg.Reps)
	fmt.Fprintf(cfg.Out, "%-22s %-14s %-14s %-10s %s\n", "operation", "avfs", "native", "ratio", "reference")
	reference := map[string]string{"write 1 MiB": "6.1 ms", "read 1 MiB": "0.215 ms", "list 1,000 entries": "0.474 ms"}
	row := func(name string, a, n time.Duration) {
		ref := reference[name]
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(cfg.Out, "%-22s %-14s %-14s %-10s %s\n", name, ms(a), ms(n), fmt.Sprintf("%.2fx", float64(a)/float64(n)), ref)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int64{1 << 10, 64 << 10, 1 << 20, 64 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		reps := cfg.Reps
		if size >= 64<<20 {
			reps = max(3, reps/3)
		}
		k := 0
		w, err := median(reps, func() error {
			k++
			data[0] = byte(k) // a new chunk each time, as a real edit would be
			return v.Update(func(tx *vfs.Tx) error {
				_, err := tx.WriteFile(fmt.Sprintf("/f%d", size), data, 0o644)
				return err
			})
		})
		if err != nil {
			return err
		}
		nw, err := median(reps, func() error { return writeSync(filepath.Join(native, fmt.Sprint(size)), data) })
		if err != nil {
			return err
		}
		r, err := median(reps, func() error {
			return v.View(func(tx *vfs.Tx) error {
				_, err := tx.ReadFile(fmt.Sprintf("/f%d", size))
				return err
			})
		})
		if err != nil {
			return err
		}
		nr, err := median(reps, func() error {
			_, err := os.ReadFile(filepath.Join(native, fmt.Sprint(size)))
			return err
		})
		if err != nil {
			return err
		}
		row("write "+human(size), w, nw)
		row("read "+human(size), r, nr)
	}
	// Listing 1,000 entries.
	err = v.Update(func(tx *vfs.Tx) error {
		d, err := tx.Mkdir(vfs.RootIno, "list", 0o755, 0, 0)
		if err != nil {
			return err
		}
		for i := range 1000 {
			if _, err := tx.Create(d.Ino, fmt.Sprintf("entry%04d", i), 0o644, 0, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ndir := filepath.Join(native, "list")
	if err := os.Mkdir(ndir, 0o755); err != nil {
		return err
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(ndir, fmt.Sprintf("entry%04d", i)), nil, 0o644); err != nil {
			return err
		}
	}
	l, err := median(cfg.Reps, func() error {
		return v.View(func(tx *vfs.Tx) error {
			a, err := tx.Resolve("/list", true)
			if err != nil {
				return err
			}
			_, err = tx.ReadDir(a.Ino)
			return err
		})
	})
	if err != nil {
		return err
	}
	nl, err := median(cfg.Reps, func() error { _, err := os.ReadDir(ndir); return err })
	if err != nil {
		return err
	}
	row("list 1,000 entries", l, nl)
	fmt.Fprintln(cfg.Out, "reference: the Rust agentvfs's published medians (M3 Pro), for orientation only: another machine")
	return nil
}

func writeSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
