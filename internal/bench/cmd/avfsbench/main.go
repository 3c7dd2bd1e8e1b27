// Command avfsbench prints the benchmarks the brief names, each beside a
// baseline measured in the same run: native disk for file I/O, the
// 100-file vault for fork, checkpoint and restore; for the growth of a
// vault under overwrites, the bound its file should stay within. `make
// bench` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/bench"
)

func main() {
	sizes := flag.String("files", "100,10000,100000", "vault sizes (file counts) for the layer benchmarks")
	total := flag.Int64("total-mb", 1024, "bytes in the largest vault, in MiB (the others keep the same file size)")
	engines := flag.String("engines", "sqlite,bolt,postgres", "engines to measure (postgres: layers, io, mount and fleet, on a server the run starts)")
	reps := flag.Int("reps", 15, "repetitions per measurement (the median is reported)")
	dir := flag.String("dir", "", "scratch directory (default: a temporary one on the native disk)")
	sections := flag.String("sections", "layers,io,verify,workout,mount,proxy,transports,growth,fleet", "what to measure: layers, io, verify, workout (diff --patch and merge; per engine), mount, proxy, transports (fuse beside overlay beside the native disk, through proxy exec), layercache (the overlay cache's copies and shared layouts; not in the default), growth (per engine), fleet (postgres: hosts forking and running proxy exec at once)")
	lcFiles := flag.Int("layercache-files", 100000, "files of the layercache section's base vault")
	lcSize := flag.Int64("layercache-size", 4096, "bytes of each of those files")
	lcForks := flag.Int("layercache-forks", 10, "forks in the layercache section")
	lcRounds := flag.Int("layercache-rounds", 2, "rounds of the layercache section (the layouts alternate)")
	hosts := flag.Int("hosts", 8, "processes with homes of their own in the fleet section")
	growthReps := flag.Int("growth-reps", 3, "runs of the growth section (100,000 overwrites each)")
	slowReps := flag.Int("mount-reps", 5, "repetitions for the mount section (it runs real workloads)")
	// How the mount section serves its loopback reference (bench.ServeLoopback).
	loopDir := flag.String("serve-loopback", "", "internal: serve a loopback of this directory at -loopback-at")
	loopAt := flag.String("loopback-at", "", "internal: the loopback's mountpoint")
	flag.Parse()
	if *loopDir != "" {
		if err := bench.ServeLoopback(*loopDir, *loopAt); err != nil {
			fail(err)
		}
		return
	}

	scratch := *dir
	if scratch == "" {
		var err error
		if scratch, err = os.MkdirTemp("", "avfsbench-"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(scratch)
	}
	var counts []int
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			fail(fmt.Errorf("bad -files value %q", s))
		}
		counts = append(counts, n)
	}
	cfg := bench.Config{Dir: scratch, Counts: counts, TotalBytes: *total << 20, Reps: *reps, Out: os.Stdout}
	want := map[string]bool{}
	for _, sec := range strings.Split(*sections, ",") {
		want[strings.TrimSpace(sec)] = true
	}
	start := time.Now()
	for _, e := range strings.Split(*engines, ",") {
		if e == "postgres" {
			if err := bench.Postgres(cfg, want, *hosts, *slowReps); err != nil {
				fail(err)
			}
			continue
		}
		if want["layers"] {
			if err := bench.Layers(cfg, e); err != nil {
				fail(err)
			}
		}
		if want["io"] {
			if err := bench.FileIO(cfg, e); err != nil {
				fail(err)
			}
		}
		if want["verify"] {
			if err := bench.Verify(cfg, e); err != nil {
				fail(err)
			}
		}
		if want["workout"] {
			if err := bench.Workout(cfg, e); err != nil {
				fail(err)
			}
		}
	}
	slow := cfg
	slow.Reps = *slowReps
	// The mount section of postgres runs with its engine (bench.Postgres).
	if want["mount"] && slices.Contains(strings.Split(*engines, ","), "sqlite") {
		fmt.Println("\n== mount (sqlite) ==")
		if err := bench.Mount(slow); err != nil {
			fail(err)
		}
	}
	if want["proxy"] {
		if err := bench.Proxy(cfg); err != nil {
			fail(err)
		}
	}
	if want["transports"] {
		if err := bench.Transports(slow); err != nil {
			fail(err)
		}
	}
	if want["layercache"] {
		if err := bench.LayerCache(cfg, bench.LayerCacheConfig{Files: *lcFiles, FileSize: *lcSize, Forks: *lcForks, Rounds: *lcRounds}); err != nil {
			fail(err)
		}
	}
	if want["growth"] {
		for _, e := range strings.Split(*engines, ",") {
			fmt.Printf("\n== overwrite growth (%s) ==\n", e)
			if err := bench.Growth(cfg, e, *growthReps); err != nil {
				fail(err)
			}
		}
	}
	fmt.Printf("\ntotal benchmark time %s\n", time.Since(start).Round(time.Second))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "avfsbench:", err)
	os.Exit(1)
}
