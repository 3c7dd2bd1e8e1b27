package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// Postgres runs the PostgreSQL sections on a server of its own, started
// as the tests start theirs but with fsync on, over a Unix socket: layers
// (fork, checkpoint save and restore through a home on the store), io
// (file I/O in a store's vault, beside SQLite's section), mount (the
// mount's read-tree and git round, MountStore, mountReps times) and fleet
// (hosts processes with homes of their own forking one base and running
// proxy exec at once). Without a server it says why and measures nothing.
func Postgres(cfg Config, sections map[string]bool, hosts, mountReps int) error {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		fmt.Fprintf(cfg.Out, "\n== postgres: skipped, no server: %v ==\n", err)
		return nil
	}
	defer srv.Stop()
	store := func(label string) (*registry.Home, string, error) {
		db, err := srv.CreateDatabase()
		if err != nil {
			return nil, "", err
		}
		dsn := srv.DSN(db)
		h, err := registry.OpenWith(filepath.Join(cfg.Dir, "home-pg-"+label), registry.Options{Store: dsn})
		return h, dsn, err
	}
	if sections["layers"] {
		h, dsn, err := store("layers")
		if err != nil {
			return err
		}
		if err := postgresLayers(cfg, h, dsn); err != nil {
			return err
		}
	}
	if sections["io"] {
		h, _, err := store("io")
		if err != nil {
			return err
		}
		if err := fileIO(cfg, h, "", "postgres (a store over a Unix socket)"); err != nil {
			return err
		}
	}
	if sections["mount"] {
		_, dsn, err := store("mount")
		if err != nil {
			return err
		}
		slow := cfg
		slow.Reps = mountReps
		if err := MountStore(slow, dsn); err != nil {
			return err
		}
	}
	if sections["fleet"] {
		_, dsn, err := store("fleet")
		if err != nil {
			return err
		}
		return Fleet(cfg, srv, dsn, hosts)
	}
	return nil
}

// postgresLayers measures fork, checkpoint save and restore of vaults in
// a store, as a home sees them: a fork is a lookup in the store's catalog,
// a new store (a row, no DDL), the fork's own O(1) writes and its name in
// the catalog.
func postgresLayers(cfg Config, h *registry.Home, dsn string) error {
	maxN := slices.Max(cfg.Counts)
	fileSize := max(cfg.TotalBytes/int64(maxN), 1)
	fmt.Fprintf(cfg.Out, "\n== layers, engine postgres: a store over a Unix socket, fsync on (files of %d bytes; median of %d) ==\n", fileSize, cfg.Reps)
	fmt.Fprintf(cfg.Out, "%-10s %-12s %-12s %-18s %-18s %-18s %s\n", "files", "data", "populate", "checkpoint", "restore", "fork", "of which new store")
	var base [3]time.Duration
	var drops []string
	for i, n := range cfg.Counts {
		name := fmt.Sprintf("base%d", n)
		v, err := h.Create(name, registry.CreateOptions{})
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
		v.Close()
		f := 0
		var forks []string
		fork, err := median(cfg.Reps, func() error {
			f++
			forks = append(forks, fmt.Sprintf("fork%d_%d", n, f))
			fv, err := h.Fork(name, forks[len(forks)-1])
			if err != nil {
				return err
			}
			return fv.Close()
		})
		if err != nil {
			return err
		}
		// What a fork's new store costs alone: the database's check and
		// an INSERT, on a warm pool.
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
		got := [3]time.Duration{save, restore, fork}
		if i == 0 {
			base = got
		}
		cell := func(j int) string {
			return fmt.Sprintf("%s (%.2fx)", ms(got[j]), float64(got[j])/float64(base[j]))
		}
		fmt.Fprintf(cfg.Out, "%-10d %-12s %-12s %-18s %-18s %-18s %s\n", n, human(int64(n)*fileSize),
			fmt.Sprintf("%.1f s", fill.Seconds()), cell(0), cell(1), cell(2), ms(table))
		// A vault's delete is a delete of its rows: O(rows), unlike the
		// fork. The forks go first (they stand on it).
		for _, fk := range forks {
			if err := h.Delete(fk); err != nil {
				return err
			}
		}
		start = time.Now()
		if err := h.Delete(name); err != nil {
			return err
		}
		drops = append(drops, fmt.Sprintf("%d files %s", n, ms(time.Since(start))))
	}
	fmt.Fprintln(cfg.Out, "target: under 20 ms at 100,000 files over a Unix socket")
	fmt.Fprintf(cfg.Out, "vault delete (its rows; chunks wait for gc): %s\n", strings.Join(drops, ", "))
	return nil
}

// Fleet measures hosts processes of the avfs binary, each with a home of
// its own on one store, each forking the same base vault (1,000 files)
// and running proxy exec in it, all at once: the wall time of the round,
// each host's fork and run, and the transactions the server saw fail to
// serialize or deadlock (each one a retry of the engine), from its log.
func Fleet(cfg Config, srv *pgtest.Server, dsn string, hosts int) error {
	bin, err := avfsBinary()
	if err != nil {
		fmt.Fprintf(cfg.Out, "\n== fleet: skipped (%v) ==\n", err)
		return nil
	}
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		fmt.Fprintln(cfg.Out, "\n== fleet: skipped (needs root and /dev/fuse) ==")
		return nil
	}
	h, err := registry.OpenWith(filepath.Join(cfg.Dir, "fleet-base"), registry.Options{Store: dsn})
	if err != nil {
		return err
	}
	v, err := h.Create("base", registry.CreateOptions{})
	if err != nil {
		return err
	}
	if err := populate(v, 1000, 4096); err != nil {
		return err
	}
	v.Close()
	avfs := func(home string, args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "AVFS_HOME="+home, "AVFS_STORE="+dsn, "AVFS_VAULT=", "AVFS_PROXY_LINGER=0")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("avfs %v: %v: %s%s", args, err, out, errOut.Bytes())
		}
		return out, nil
	}
	logBefore, _ := srv.Log()
	rounds := max(3, cfg.Reps/3)
	var totals, forks, runs []time.Duration
	for r := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		start := time.Now()
		for i := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				home := filepath.Join(cfg.Dir, fmt.Sprintf("fleet-host%d", i))
				task := fmt.Sprintf("task-%d-%d", r, i)
				t0 := time.Now()
				_, err := avfs(home, "vault", "fork", "base", task)
				t1 := time.Now()
				var out []byte
				if err == nil {
					out, err = avfs(home, "--vault", task, "proxy", "exec", "--json", "--shell", "ls d00 | wc -l > count.txt")
				}
				if err == nil {
					var e proxyEnvelope
					if jerr := json.Unmarshal(out, &e); jerr != nil || e.Result.State != "completed" || e.Result.ExitCode == nil || *e.Result.ExitCode != 0 {
						err = fmt.Errorf("host %d: proxy exec: %s", i, out)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				forks = append(forks, t1.Sub(t0))
				runs = append(runs, time.Since(t1))
			}()
		}
		wg.Wait()
		totals = append(totals, time.Since(start))
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	logAfter, _ := srv.Log()
	fresh := logAfter[min(len(logBefore), len(logAfter)):]
	serial := bytes.Count(fresh, []byte("could not serialize access"))
	deadlocks := bytes.Count(fresh, []byte("deadlock detected"))
	busy := bytes.Count(fresh, []byte("lock timeout"))
	fmt.Fprintf(cfg.Out, "\n== fleet: %d hosts (processes with homes of their own) on one store, each forking one base (1,000 files) and running proxy exec, at once; %d rounds ==\n", hosts, rounds)
	fmt.Fprintf(cfg.Out, "%-28s %s\n", "round (all hosts)", spread(totals))
	fmt.Fprintf(cfg.Out, "%-28s %s\n", "vault fork, per host", spread(forks))
	fmt.Fprintf(cfg.Out, "%-28s %s\n", "proxy exec, per host", spread(runs))
	fmt.Fprintf(cfg.Out, "%-28s %d serialization failures, %d deadlocks (each retried), %d lock timeouts\n", "retries (server log)", serial, deadlocks, busy)
	return nil
}

// spread is the median and the range of ds.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, range %s – %s (n=%d)", ms(medianOf(s)), ms(s[0]), ms(s[len(s)-1]), len(s))
}
