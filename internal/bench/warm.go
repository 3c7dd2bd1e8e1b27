package bench

import (
	"fmt"
	"slices"
	"time"
)

// warmRow measures a workload as an agent's consecutive runs meet it:
// one vault, one run after another with --linger's default and nothing
// restored between, so each run after the first finds the last one's
// mount (FUSE's, or root's overlay, served by its own process); the
// native side repeats the same work on its tree without resetting it.
// The first run of each side warms up and is not counted. Each transport
// runs its reps in a block of its own (a run on another transport ends
// the lingering mount), each rep beside a native run, in alternating
// order, and its ratio is to that native run.
func warmRow(cfg Config, reps int, name, target, script string, nativeDir func() string, env []string, reset func() error,
	avfs func(...string) ([]byte, error), runAs func(tr string, lingering bool, script string) (transportEnvelope, error)) error {
	native := func() (time.Duration, error) {
		start := time.Now()
		err := shEnv(nativeDir(), env, script) // reset names a new tree
		return time.Since(start), err
	}
	var nats []time.Duration
	ds := map[string][]time.Duration{}
	ratios := map[string][]float64{}
	setup := map[string][]time.Duration{} // the checkpoint and mount stages of a warm run
	sides := []string{"fuse", "overlay"}
	for _, tr := range sides {
		// The same start for both: the base state, and the lingering
		// mount of the block before ended (a restore is a CLI write).
		if _, err := avfs("checkpoint", "restore", "base"); err != nil {
			return err
		}
		if err := reset(); err != nil {
			return err
		}
		if _, err := native(); err != nil {
			return err
		}
		if _, err := runAs(tr, true, script); err != nil {
			return err
		}
		for rep := range reps {
			var nat, got time.Duration
			for k := range 2 {
				if (rep+k)%2 == 0 {
					d, err := native()
					if err != nil {
						return err
					}
					nat = d
					continue
				}
				e, err := runAs(tr, true, script)
				if err != nil {
					return err
				}
				if !e.Result.MountReused {
					return fmt.Errorf("warm %s run %d of %q did not reuse the last run's mount", tr, rep+1, name)
				}
				got = time.Duration((e.Result.StageMs["execute"] + e.Result.StageMs["summarize"]) * 1e6)
				setup[tr] = append(setup[tr], time.Duration((e.Result.StageMs["checkpoint"]+e.Result.StageMs["mount"])*1e6))
			}
			nats = append(nats, nat)
			ds[tr] = append(ds[tr], got)
			ratios[tr] = append(ratios[tr], float64(got)/float64(nat))
		}
	}
	if _, err := avfs("checkpoint", "restore", "base"); err != nil { // ends the last lingering mount
		return err
	}
	cell := map[string]string{}
	for _, tr := range sides {
		r := ratios[tr]
		slices.Sort(r)
		cell[tr] = fmt.Sprintf("%s %.2fx (%.2f-%.2f)", ms(medianOf(ds[tr])), r[len(r)/2], r[0], r[len(r)-1])
	}
	fmt.Fprintf(cfg.Out, "%-30s %-10s %-26s %-26s ≤ %s\n", name+", warm", ms(medianOf(nats)), cell["fuse"], cell["overlay"], target)
	fmt.Fprintf(cfg.Out, "  warm set-up (checkpoint + mount stages, median): fuse %s, overlay %s\n", ms(medianOf(setup["fuse"])), ms(medianOf(setup["overlay"])))
	return nil
}
