package bolt

import (
	"errors"
	"os"

	"go.etcd.io/bbolt"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/internal/fsutil"
)

// Space and reclaim (kv.Reclaimer).
//
// bbolt reuses freed pages but never shrinks its file, and has no
// incremental way to: Rewrite compacts the live pairs into a new file
// next to the old one and renames it over the old one. The new file is
// locked before the rename and the old one until after it, so a process
// that opens the vault's path meanwhile waits for the new file's lock;
// one that was waiting for the old file's lock sees, once it has it, that
// the path names another file, and opens again (openBolt). A crash
// before the rename leaves the old file as it was (and a stale ".rewrite"
// file the next Rewrite removes); after it, the new file, complete and
// synced.

var _ kv.Reclaimer = (*DB)(nil)

// rewriteTxSize bounds each transaction of the copy, so that it never
// holds more than this in dirty pages.
const rewriteTxSize = 64 << 20

// Space implements kv.Spacer.
func (d *DB) Space() (kv.Space, error) {
	if err := d.enter(); err != nil {
		return kv.Space{}, err
	}
	defer d.running.Done()
	db := d.bolt()
	var sp kv.Space
	if fi, err := os.Stat(d.path); err == nil {
		sp.FileBytes = fi.Size()
	}
	sp.FreeBytes = int64(db.Stats().FreeAlloc)
	err := d.guard(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			sp.UsedBytes = tx.Size() - sp.FreeBytes
			return nil
		})
	})
	return sp, wrapErr(d.path, "space", err)
}

// Reclaim implements kv.Reclaimer: bbolt has nothing incremental, so it
// gives nothing back (Rewrite does).
func (d *DB) Reclaim(int64) (int64, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	d.running.Done()
	return 0, nil
}

// Rewrite implements kv.Reclaimer by compaction into a new file. Writers
// wait for it; readers do not.
func (d *DB) Rewrite() error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.running.Done()
	d.wmu.Lock()
	defer d.wmu.Unlock()
	tmp := d.path + ".rewrite"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return wrapErr(d.path, "rewrite", err)
	}
	if err := fsutil.CreateNew(tmp); err != nil {
		return wrapErr(d.path, "rewrite", err)
	}
	var dst *bbolt.DB
	err := d.guard(func() (err error) {
		if dst, err = bbolt.Open(tmp, fsutil.FileMode, boltOptions(d.opts)); err != nil {
			return err
		}
		return bbolt.Compact(dst, d.bolt(), rewriteTxSize)
	})
	if err == nil {
		err = dst.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, d.path)
	}
	if err != nil {
		if dst != nil {
			_ = dst.Close()
		}
		_ = os.Remove(tmp)
		return wrapErr(d.path, "rewrite", err)
	}
	// From the rename on, the path names the new file: use it whatever
	// follows.
	d.mu.Lock()
	old := d.db
	d.db = dst
	d.mu.Unlock()
	// Close waits for the reads still running on the old file.
	return wrapErr(d.path, "rewrite", errors.Join(fsutil.SyncDir(d.path), old.Close()))
}
