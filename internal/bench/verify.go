package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Verify measures what checking chunks against their hashes costs a read
// of a whole tree (vfs.VerifyMode), with the model's reads in this
// process, where nothing else (FUSE, a process start) hides it: the same
// tree read with the check off (as before reads were verified), at every
// read, and once per chunk, both on a Vault's first read of each chunk
// (a CLI command, a new mount) and on its later reads (a mount). The
// modes alternate within each repetition, so a slow moment of the machine
// weighs on all alike.
func Verify(cfg Config, engine string) error {
	home, err := registry.Open(filepath.Join(cfg.Dir, "home-verify-"+engine))
	if err != nil {
		return err
	}
	defer os.RemoveAll(home.Dir)
	trees := []struct {
		name  string
		files int
		size  int64
	}{
		{"2,000 files of 16 KiB", 2000, 16 << 10},
		{"64 files of 2 MiB", 64, 2 << 20},
	}
	reps := max(cfg.Reps, 3)
	fmt.Fprintf(cfg.Out, "\n== read verification, engine %s (a whole tree read in-process; median and range of %d, modes alternating) ==\n", engine, reps)
	fmt.Fprintf(cfg.Out, "%-24s %-28s %-32s %s\n", "tree", "check", "time", "vs off")
	for i, tr := range trees {
		v, err := home.Create(fmt.Sprintf("verify%d", i), registry.CreateOptions{Engine: engine})
		if err != nil {
			return err
		}
		if err := populate(v, tr.files, tr.size); err != nil {
			v.Close()
			return err
		}
		err = verifyTree(cfg, v, tr.name, reps)
		v.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func verifyTree(cfg Config, v *vfs.Vault, name string, reps int) error {
	modes := []string{"off", "every read", "once: first read", "once: later reads"}
	ds := make([][]time.Duration, len(modes))
	run := func(k int) error {
		switch k {
		case 0:
			v.SetVerifyReads(vfs.VerifyOff)
		case 1:
			v.SetVerifyReads(vfs.VerifyAlways)
		case 2:
			v.SetVerifyReads(vfs.VerifyOnce) // forgets what was verified
		}
		start := time.Now()
		if err := readTree(v); err != nil {
			return err
		}
		ds[k] = append(ds[k], time.Since(start))
		return nil
	}
	if err := readTree(v); err != nil { // warm the engine's caches
		return err
	}
	for r := range reps {
		// Rotate off, every read and once (first then later reads).
		for j := range 3 {
			k := (r + j) % 3
			if err := run(k); err != nil {
				return err
			}
			if k == 2 {
				if err := run(3); err != nil {
					return err
				}
			}
		}
	}
	v.SetVerifyReads(vfs.VerifyOnce)
	base := medianOf(ds[0])
	for k, m := range modes {
		med := medianOf(ds[k])
		fmt.Fprintf(cfg.Out, "%-24s %-28s %-32s %.3fx\n", name, m,
			fmt.Sprintf("%s (%s–%s)", ms(med), ms(slices.Min(ds[k])), ms(slices.Max(ds[k]))), float64(med)/float64(base))
		name = ""
	}
	return nil
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// readTree reads every file of the vault, one read transaction per
// directory, in 1 MiB steps as the CLI does.
func readTree(v *vfs.Vault) error {
	buf := make([]byte, 1<<20)
	var dirs []vfs.Ino
	err := v.View(func(tx *vfs.Tx) error {
		ents, err := tx.ReadDir(vfs.RootIno)
		for _, e := range ents {
			if e.Type == vfs.TypeDir {
				dirs = append(dirs, e.Ino)
			}
		}
		return err
	})
	for _, d := range dirs {
		if err != nil {
			break
		}
		err = v.View(func(tx *vfs.Tx) error {
			ents, err := tx.ReadDir(d)
			if err != nil {
				return err
			}
			for _, e := range ents {
				a, err := tx.GetAttr(e.Ino)
				if err != nil {
					return err
				}
				for off := int64(0); off < int64(a.Size); {
					n, err := tx.Read(e.Ino, off, buf)
					if err != nil {
						return err
					}
					off += int64(n)
				}
			}
			return nil
		})
	}
	return err
}
