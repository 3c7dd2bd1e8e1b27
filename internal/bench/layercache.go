package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// LayerCacheConfig sizes the layer cache section.
type LayerCacheConfig struct {
	Files    int   // files of the base vault
	FileSize int64 // bytes each
	Forks    int   // forks that each change a few files
	Rounds   int   // rounds; the layouts alternate within each
}

// LayerCache measures the overlay layer cache's two layouts against each
// other on the same vaults, alternating them round by round (the machine
// is shared: ranges, not one number): the disk the cache uses for a base
// vault and for forks that each changed a few files through the vault
// (each fork's state is then a squashed base of its own), the time to
// materialize the first run and a fork's run, reading the whole tree
// through a mount, a git round, and the copy-up of a 50 MiB file.
func LayerCache(cfg Config, lc LayerCacheConfig) error {
	if os.Geteuid() != 0 {
		fmt.Fprintln(cfg.Out, "\n== layer cache: skipped (overlay needs root) ==")
		return nil
	}
	work, err := os.MkdirTemp(cfg.Dir, "layercache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	home, err := registry.OpenWith(filepath.Join(work, "home"), registry.Options{})
	if err != nil {
		return err
	}
	base, err := home.Create("base", registry.CreateOptions{})
	if err != nil {
		return err
	}
	if err := populate(base, lc.Files, lc.FileSize); err != nil {
		return err
	}
	if err := gitVault(base, work); err != nil {
		return err
	}
	if err := base.Update(func(tx *vfs.Tx) error {
		_, err := tx.WriteFile("/big.bin", randomBytes(50, 50<<20), 0o644)
		return err
	}); err != nil {
		return err
	}
	if _, err := base.SaveCheckpoint("start", ""); err != nil {
		return err
	}
	var forks []*vfs.Vault
	for i := range lc.Forks {
		f, err := home.Fork("base", fmt.Sprintf("fork%d", i))
		if err != nil {
			return err
		}
		if err := f.Update(func(tx *vfs.Tx) error {
			for j := range 3 {
				if _, err := tx.WriteFile(fmt.Sprintf("/d%02d/f%06d", j, j*100+i), []byte(fmt.Sprintf("fork %d edit %d\n", i, j)), 0o644); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		forks = append(forks, f)
	}
	layouts := []overlay.Layout{overlay.Copies, overlay.Shared}
	type result struct {
		firstMs, forkMs, readMs, gitMs, copyUpMs []float64
		baseKB, forksKB                          []int64
	}
	res := map[overlay.Layout]*result{}
	for _, l := range layouts {
		res[l] = &result{}
	}
	fmt.Fprintf(cfg.Out, "\n== layer cache layouts (%d files of %d bytes, %d forks with 3 files changed; %d rounds) ==\n",
		lc.Files, lc.FileSize, lc.Forks, lc.Rounds)
	for round := range lc.Rounds {
		order := layouts
		if round%2 == 1 {
			order = []overlay.Layout{overlay.Shared, overlay.Copies}
		}
		for _, l := range order {
			r := res[l]
			c := &overlay.Cache{Root: filepath.Join(work, "cache-"+string(l)), Format: overlay.Trusted, Layout: l}
			start := time.Now()
			run, err := c.StartReadOnly(context.Background(), base, "first", "")
			if err != nil {
				return err
			}
			r.firstMs = append(r.firstMs, msSince(start))
			t0 := time.Now()
			if err := readHostTree(run.Merged); err != nil {
				run.Discard()
				return err
			}
			r.readMs = append(r.readMs, msSince(t0))
			if err := run.Discard(); err != nil {
				return err
			}
			kb, err := duKB(c.Root)
			if err != nil {
				return err
			}
			r.baseKB = append(r.baseKB, kb)
			for _, f := range forks {
				start := time.Now()
				run, err := c.StartReadOnly(context.Background(), f, "fork", "")
				if err != nil {
					return err
				}
				r.forkMs = append(r.forkMs, msSince(start))
				if err := run.Discard(); err != nil {
					return err
				}
			}
			if kb, err = duKB(c.Root); err != nil {
				return err
			}
			r.forksKB = append(r.forksKB, kb)
			ms, err := timedRun(c, base, func(m string) error {
				return sh(filepath.Join(m, "r"), `git status --short >/dev/null && echo edit >> d1/f1 && git add -A && git commit -qm edit && git status --short >/dev/null`)
			})
			if err != nil {
				return err
			}
			r.gitMs = append(r.gitMs, ms)
			if ms, err = timedRun(c, base, func(m string) error { return editMid(filepath.Join(m, "big.bin")) }); err != nil {
				return err
			}
			r.copyUpMs = append(r.copyUpMs, ms)
			if err := os.RemoveAll(c.Root); err != nil {
				return err
			}
		}
	}
	native := filepath.Join(work, "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		return err
	}
	if err := base.View(func(tx *vfs.Tx) error { _, err := overlay.Materialize(context.Background(), tx, native); return err }); err != nil {
		return err
	}
	var nativeRead []float64
	for range lc.Rounds {
		t0 := time.Now()
		if err := readHostTree(native); err != nil {
			return err
		}
		nativeRead = append(nativeRead, msSince(t0))
	}
	row := func(name string, f func(r *result) string) {
		fmt.Fprintf(cfg.Out, "%-44s %-24s %-24s\n", name, f(res[overlay.Copies]), f(res[overlay.Shared]))
	}
	fmt.Fprintf(cfg.Out, "%-44s %-24s %-24s\n", "", "copies", "shared")
	row("cache on disk, base (du)", func(r *result) string { return mbRange(r.baseKB) })
	row(fmt.Sprintf("cache on disk, base + %d forks (du)", lc.Forks), func(r *result) string { return mbRange(r.forksKB) })
	row("materialize the first run", func(r *result) string { return msRange(r.firstMs) })
	row("materialize a fork's run", func(r *result) string { return msRange(r.forkMs) })
	row(fmt.Sprintf("read the whole tree (native %s)", msRange(nativeRead)), func(r *result) string { return msRange(r.readMs) })
	row("git round (2,000 files)", func(r *result) string { return msRange(r.gitMs) })
	row("1 MiB edit + fsync of a 50 MiB file", func(r *result) string { return msRange(r.copyUpMs) })
	return nil
}

// gitVault puts a git repository of 2,000 files at /r of v.
func gitVault(v *vfs.Vault, work string) error {
	dir := filepath.Join(work, "git")
	if err := os.MkdirAll(filepath.Join(dir, "r"), 0o755); err != nil {
		return err
	}
	err := sh(filepath.Join(dir, "r"), `git init -q && git config user.email b@b && git config user.name b &&
for d in $(seq 20); do mkdir d$d; for f in $(seq 100); do echo "line $d $f" > d$d/f$f; done; done &&
git add -A && git commit -qm init`)
	if err != nil {
		return err
	}
	_, err = v.UpdateSealed(func(tx *vfs.Tx) error {
		_, err := overlay.Ingest(tx, dir, overlay.Trusted)
		return err
	})
	return err
}

// timedRun times fn in a writable run of v's state (warm: the cache
// holds it), then throws the run away so that the state stays.
func timedRun(c *overlay.Cache, v *vfs.Vault, fn func(merged string) error) (float64, error) {
	if err := v.RestoreCheckpoint("start"); err != nil {
		return 0, err
	}
	run, err := c.Start(context.Background(), v, "timed", "")
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	err = fn(run.Merged)
	ms := msSince(t0)
	return ms, errors.Join(err, run.Discard())
}

// editMid writes 1 MiB in the middle of a file and syncs it: the first
// write copies the whole file up.
func editMid(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(randomBytes(1, 1<<20), 25<<20); err != nil {
		return err
	}
	return f.Sync()
}

// readHostTree reads every regular file below root.
func readHostTree(root string) error {
	buf := make([]byte, 1<<16)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyBuffer(io.Discard, f, buf)
		return err
	})
}

// duKB is `du -sk dir`: blocks in use, a hard-linked file once.
func duKB(dir string) (int64, error) {
	out, err := exec.Command("du", "-sk", dir).Output()
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", dir, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("du %s: no output", dir)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func msRange(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if hi-lo < 0.05*hi {
		return fmt.Sprintf("%.1f ms", (lo+hi)/2)
	}
	return fmt.Sprintf("%.1f–%.1f ms", lo, hi)
}

func mbRange(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == hi {
		return fmt.Sprintf("%.1f MiB", float64(lo)/1024)
	}
	return fmt.Sprintf("%.1f–%.1f MiB", float64(lo)/1024, float64(hi)/1024)
}
