package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Growth measures how big a vault's file gets under overwrites: a 4 MiB
// file, held also by a checkpoint, has random ranges (4–64 KiB) rewritten
// 100,000 times through a mount served by its own avfs process, with an
// fsync every 100 writes so that the rewritten chunks reach the vault.
// The file should end within 2× of (live data + what checkpoints hold) +
// 64 MiB; without collection it grows by every chunk persisted. It prints
// the file's size over the run, its peak, and what the mount's background
// collection cost (from the lines the mount logs for each collection),
// as ranges over reps runs.
func Growth(cfg Config, engine string, reps int) error {
	bin, err := avfsBinary()
	if err != nil {
		return err
	}
	w := cfg.Out
	fmt.Fprintf(w, "overwrite growth (%s): rewrite random 4–64 KiB ranges of a 4 MiB file 100,000 times through a mount,\n"+
		"  fsync every 100 writes; a checkpoint holds the first version; %d runs\n", engine, reps)
	// Each run beside one with the collection off (AVFS_MOUNT_GC=0) on
	// the same writes, which comes first alternating: the loop's time
	// with and without it is what the collection costs the writer.
	var runs, bases []growthRun
	for r := range max(reps, 1) {
		var run, base growthRun
		for k := range 2 {
			gc := (r+k)%2 == 0
			got, err := growthOnce(cfg.Dir, bin, engine, uint64(r), gc)
			if err != nil {
				return err
			}
			if gc {
				run = got
			} else {
				base = got
			}
		}
		runs, bases = append(runs, run), append(bases, base)
		fmt.Fprintf(w, "  run %d: vault file (MiB, every 10,000 writes): %s\n", r+1, run.series)
		fmt.Fprintf(w, "         without collection:              %s\n", base.series)
	}
	rng := func(f func(growthRun) float64, unit string, prec int) string { return rngOf(runs, f, unit, prec) }
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "  %-34s %s\n", "peak vault file", rng(func(r growthRun) float64 { return mib(r.peak) }, "MiB", 1))
	fmt.Fprintf(w, "  %-34s %s\n", "vault file at the end", rng(func(r growthRun) float64 { return mib(r.final) }, "MiB", 1))
	fmt.Fprintf(w, "  %-34s %s (live %s + checkpoints %s)\n", "bound 2×(live+checkpoints)+64 MiB",
		rng(func(r growthRun) float64 { return mib(r.bound) }, "MiB", 1),
		rng(func(r growthRun) float64 { return mib(r.live) }, "MiB", 1),
		rng(func(r growthRun) float64 { return mib(r.held) }, "MiB", 1))
	fmt.Fprintf(w, "  %-34s %s\n", "chunk data collected", rng(func(r growthRun) float64 { return mib(r.freed) }, "MiB", 0))
	fmt.Fprintf(w, "  %-34s %s\n", "peak without collection", rngOf(bases, func(r growthRun) float64 { return mib(r.peak) }, "MiB", 0))
	fmt.Fprintf(w, "  %-34s %s, without collection %s\n", "overwrite loop",
		rng(func(r growthRun) float64 { return r.loop.Seconds() }, "s", 1),
		rngOf(bases, func(r growthRun) float64 { return r.loop.Seconds() }, "s", 1))
	fmt.Fprintf(w, "  %-34s %s, without collection %s\n", "mount server CPU time (user+sys)",
		rng(func(r growthRun) float64 { return r.cpu.Seconds() }, "s", 1),
		rngOf(bases, func(r growthRun) float64 { return r.cpu.Seconds() }, "s", 1))
	fmt.Fprintf(w, "  %-34s %s, %s in all (%s of the loop), longest %s\n", "background collections",
		rng(func(r growthRun) float64 { return float64(r.gcRuns) }, "runs", 0),
		rng(func(r growthRun) float64 { return r.gcTotal.Seconds() * 1e3 }, "ms", 0),
		rng(func(r growthRun) float64 { return 100 * r.gcTotal.Seconds() / r.loop.Seconds() }, "%", 1),
		rng(func(r growthRun) float64 { return r.gcMax.Seconds() * 1e3 }, "ms", 1))
	fmt.Fprintf(w, "  %-34s %s (what a writer may wait for it)\n", "longest write step of a collection",
		rng(func(r growthRun) float64 { return r.stepMax.Seconds() * 1e3 }, "ms", 1))
	return nil
}

type growthRun struct {
	series               string
	peak, final, bound   int64
	live, held, freed    int64
	loop, gcTotal, gcMax time.Duration
	stepMax, cpu         time.Duration
	gcRuns               int
}

func growthOnce(dir, bin, engine string, seed uint64, gc bool) (run growthRun, err error) {
	work, err := os.MkdirTemp(dir, "growthbench-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(work)
	home := filepath.Join(work, "home")
	mnt := filepath.Join(work, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return run, err
	}
	env := append(os.Environ(), "AVFS_HOME="+home)
	if !gc {
		env = append(env, "AVFS_MOUNT_GC=0")
	}
	avfs := func(args ...string) ([]byte, error) {
		c := exec.Command(bin, args...)
		c.Env = env
		out, err := c.Output()
		if err != nil {
			return out, fmt.Errorf("avfs %s: %w", strings.Join(args, " "), err)
		}
		return out, nil
	}
	if _, err := avfs("vault", "create", "g", "--backend", engine); err != nil {
		return run, err
	}
	// The first version goes in and into a checkpoint before the mount
	// (a bbolt vault is open in one process at a time).
	const fileSize = 4 << 20
	src := filepath.Join(work, "first")
	if err := os.WriteFile(src, randomBytes(seed+1, fileSize), 0o644); err != nil {
		return run, err
	}
	if _, err := avfs("import", src, "/big", "--vault", "g"); err != nil {
		return run, err
	}
	if _, err := avfs("checkpoint", "save", "first", "--vault", "g"); err != nil {
		return run, err
	}
	out, err := avfs("mount", "g", mnt, "--json")
	if err != nil {
		return run, err
	}
	var m struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return run, fmt.Errorf("avfs mount printed %q: %w", out, err)
	}
	mounted := true
	defer func() {
		if mounted {
			_, _ = avfs("unmount", mnt)
		}
	}()
	vaultFile := filepath.Join(home, "vaults", "g.avfs")
	size := func() int64 {
		var n int64
		for _, p := range []string{vaultFile, vaultFile + "-wal"} {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	p := filepath.Join(mnt, "big")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return run, err
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(seed, 99))
	var series []string
	start := time.Now()
	const writes, syncEvery = 100_000, 100
	buf := make([]byte, 64<<10)
	for i := 1; i <= writes; i++ {
		n := 4<<10 + rng.IntN(60<<10)
		off := rng.IntN(fileSize - n)
		for j := range buf[:n] {
			buf[j] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(buf[:n], int64(off)); err != nil {
			return run, err
		}
		if i%syncEvery == 0 {
			if err := f.Sync(); err != nil {
				return run, err
			}
			run.peak = max(run.peak, size())
		}
		if i%10_000 == 0 {
			series = append(series, strconv.FormatFloat(float64(size())/(1<<20), 'f', 0, 64))
		}
	}
	run.loop = time.Since(start)
	run.cpu = cpuTime(m.PID)
	run.series = strings.Join(series, " ")
	if err := f.Close(); err != nil {
		return run, err
	}
	// What the run persisted, and what the background collection did,
	// from the mount's log; then the vault's own account of its bytes.
	logs, _ := filepath.Glob(filepath.Join(home, "mounts", "*.log"))
	if _, err := avfs("unmount", mnt); err != nil {
		return run, err
	}
	mounted = false
	for _, l := range logs {
		if err := readGCLog(l, &run); err != nil {
			return run, err
		}
	}
	out, err = avfs("vault", "info", "g", "--json")
	if err != nil {
		return run, err
	}
	var info struct {
		Space struct {
			Live       int64 `json:"live_bytes"`
			Checkpoint int64 `json:"checkpoint_bytes"`
		} `json:"space"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return run, fmt.Errorf("vault info printed %q: %w", out, err)
	}
	run.live, run.held = info.Space.Live, info.Space.Checkpoint
	run.bound = 2*(run.live+run.held) + 64<<20
	run.final = size()
	return run, nil
}

// readGCLog adds up the mount's collection lines: "gc: freed N chunks
// (B bytes), kept K, gave back R bytes in T ms, longest step S ms".
func readGCLog(path string, run *growthRun) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "gc: freed ")
		if i < 0 {
			continue
		}
		var chunks, kept int
		var freed, back int64
		var ms, stepMS float64
		if _, err := fmt.Sscanf(line[i:], "gc: freed %d chunks (%d bytes), kept %d, gave back %d bytes in %f ms, longest step %f ms",
			&chunks, &freed, &kept, &back, &ms, &stepMS); err != nil {
			return fmt.Errorf("mount log line %q: %w", line, err)
		}
		d := time.Duration(ms * 1e6)
		run.gcRuns++
		run.gcTotal += d
		run.gcMax = max(run.gcMax, d)
		run.stepMax = max(run.stepMax, time.Duration(stepMS*1e6))
		run.freed += freed
	}
	return sc.Err()
}

// rngOf is the range of f over runs.
func rngOf(runs []growthRun, f func(growthRun) float64, unit string, prec int) string {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = f(r)
	}
	return fmt.Sprintf("%.*f–%.*f %s", prec, slices.Min(vs), prec, slices.Max(vs), unit)
}

// cpuTime is the user and system CPU time process pid has used so far
// (Linux; 0 elsewhere).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
