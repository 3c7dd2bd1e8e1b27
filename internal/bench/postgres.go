package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// PostgresLayers measures fork, checkpoint save and restore on the
// PostgreSQL engine, on a server of its own started as the tests start
// theirs but with fsync on, over a Unix socket. Each vault is a table of
// one database; a fork is a new table (a pool, a check of the store, a
// CREATE TABLE) plus the fork's own O(1) writes. Without a server it
// says why and measures nothing.
func PostgresLayers(cfg Config) error {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		fmt.Fprintf(cfg.Out, "\n== layers, engine postgres: skipped, no server: %v ==\n", err)
		return nil
	}
	defer srv.Stop()
	db, err := srv.CreateDatabase()
	if err != nil {
		return err
	}
	dsn := srv.DSN(db)
	var opener vfs.Opener
	opener = func(name, _ string) (*vfs.Vault, error) {
		eng, err := engines.OpenAt(dsn, name)
		if err != nil {
			return nil, err
		}
		v, err := vfs.Open(eng, opener)
		if err != nil {
			eng.Close()
		}
		return v, err
	}
	maxN := slices.Max(cfg.Counts)
	fileSize := max(cfg.TotalBytes/int64(maxN), 1)
	fmt.Fprintf(cfg.Out, "\n== layers, engine postgres over a Unix socket, fsync on (files of %d bytes; median of %d) ==\n", fileSize, cfg.Reps)
	fmt.Fprintf(cfg.Out, "%-10s %-12s %-12s %-18s %-18s %-18s %s\n", "files", "data", "populate", "checkpoint", "restore", "fork", "of which new table")
	var base [3]time.Duration
	for i, n := range cfg.Counts {
		name := fmt.Sprintf("base%d", n)
		eng, err := engines.CreateAt(dsn, name)
		if err != nil {
			return err
		}
		v, err := vfs.Create(eng, name, vfs.Quota{})
		if err != nil {
			return err
		}
		start := time.Now()
		if err := populate(v, n, fileSize); err != nil {
			return err
		}
		fill := time.Since(start)
		if _, err := v.SaveCheckpoint("start", ""); err != nil {
			return err
		}
		save, restore, err := saveAndRestore(cfg.Reps, v)
		if err != nil {
			return err
		}
		f := 0
		fork, err := median(cfg.Reps, func() error {
			f++
			child := fmt.Sprintf("fork%d_%d", n, f)
			ceng, err := engines.CreateAt(dsn, child)
			if err != nil {
				return err
			}
			fv, err := v.Fork(ceng, child, opener)
			if err != nil {
				ceng.Close()
				return err
			}
			return fv.Close()
		})
		if err != nil {
			return err
		}
		// What a fork's new table costs alone: a pool, its first
		// connection, the store's check, CREATE TABLE, a commit.
		table, err := median(cfg.Reps, func() error {
			f++
			e, err := engines.CreateAt(dsn, fmt.Sprintf("empty%d_%d", n, f))
			if err != nil {
				return err
			}
			return e.Close()
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
		fmt.Fprintf(cfg.Out, "%-10d %-12s %-12s %-18s %-18s %-18s %s\n", n, human(int64(n)*fileSize),
			fmt.Sprintf("%.1f s", fill.Seconds()), cell(0), cell(1), cell(2), ms(table))
	}
	fmt.Fprintln(cfg.Out, "target: under 20 ms at 100,000 files over a Unix socket")
	return nil
}
