//go:build linux

package overlay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// startGrace is how old a run dir without a pending.json must be before
// Clear takes it: Start writes pending.json right after it makes the dir,
// so a younger one may be a run being started.
const startGrace = time.Minute

// Clear empties a cache that nobody will use again (the layer cache of an
// avfs home that is gone) of everything that is only a cache and nobody
// holds: the temporary dirs, the dirs of runs that never wrote a
// pending.json (a crash while starting) and have nothing mounted, every
// entry no mount leases (tops first, as DropVault), and the store's data
// files no entry left names; the cache's dir itself goes when nothing
// else is left in it. It reports whether it went.
//
// A run dir with a pending.json stays, mounted or not, and so does the
// cache's dir above it: it may hold the writes of a run that a crash left
// un-ingested, which the vault's next open ingests (Recover). A home that
// looks gone may be on a filesystem that is just not mounted now; an
// entry can be rebuilt, a run's writes cannot.
func (c *Cache) Clear() (gone bool, err error) {
	des, err := os.ReadDir(c.Root)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, hostErr("layer cache", c.Root, err)
	}
	c.removeLeftovers(des)
	ents, err := c.Entries()
	if err != nil {
		return false, err
	}
	var all []string
	for _, e := range ents {
		all = append(all, e.Key)
	}
	if _, err := c.dropTopsFirst(all, ents); err != nil {
		return false, err
	}
	if _, err := c.Sweep(); err != nil {
		return false, err
	}
	return c.removeIfBare()
}

// removeLeftovers removes, of the cache's dir entries des, what a crash
// left: the .tmp- dirs and the run dirs that never started.
func (c *Cache) removeLeftovers(des []os.DirEntry) {
	for _, d := range des {
		dir := filepath.Join(c.Root, d.Name())
		switch {
		case strings.HasPrefix(d.Name(), ".tmp-"):
			_ = removeAll(dir)
		case strings.HasPrefix(d.Name(), runPrefix) && startedNothing(dir):
			_ = removeAll(dir) // a crash while starting: no pending.json, nothing mounted
		}
	}
}

// startedNothing reports whether run dir dir is what a crash while
// starting left: no pending.json, old enough not to be starting now, and
// nothing mounted in it (a removal must never walk into a mount).
func startedNothing(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, "pending.json")); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < startGrace {
		return false
	}
	return !isMountpoint(filepath.Join(dir, "merged")) && !isMountpoint(filepath.Join(dir, "rw"))
}

// removeIfBare removes the cache's dir when it holds nothing but its
// bookkeeping: the probe's verdicts and a store without data files. The
// store's lock is held meanwhile, so no build is writing into it.
func (c *Cache) removeIfBare() (bool, error) {
	if _, err := os.Stat(c.storeRoot()); err == nil {
		lock, ok, err := c.lockStore(true)
		if err != nil || !ok {
			return false, err
		}
		defer lock.Close()
	}
	des, err := os.ReadDir(c.Root)
	if err != nil {
		return errors.Is(err, os.ErrNotExist), hostErr("layer cache", c.Root, ignoreMissing(err))
	}
	for _, d := range des {
		if d.Name() != storeDir && !(strings.HasPrefix(d.Name(), probeFilePrefix) && !d.IsDir()) {
			return false, nil
		}
	}
	if subs, err := os.ReadDir(c.storeRoot()); err == nil {
		for _, s := range subs {
			if s.IsDir() && os.Remove(filepath.Join(c.storeRoot(), s.Name())) != nil {
				return false, nil // a data file is left
			}
		}
	}
	return true, hostErr("layer cache", c.Root, os.RemoveAll(c.Root))
}
