package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// layerEntries lists the layer cache's entries of home's vault v, as
// layer numbers, and the vault's ID and the layers its file holds.
func layerEntries(t *testing.T, home string) (id string, entries []uint64, held map[uint64]bool) {
	id, entries, held, _ = layerTree(t, home)
	return id, entries, held
}

// layerTree is layerEntries with each entry's parent (the entry it is a
// delta over, "" for a base), by layer number within the vault.
func layerTree(t *testing.T, home string) (id string, entries []uint64, held map[uint64]bool, parent map[uint64]string) {
	t.Helper()
	h, err := registry.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	held = map[uint64]bool{}
	if v, err := h.Open("v"); err == nil {
		id = v.ID()
		ids, err := v.LayerIDs()
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ids {
			held[l] = true
		}
	}
	runDir, err := proxy.RuntimeDir(home, "")
	if err != nil {
		t.Fatal(err)
	}
	parent = map[uint64]string{}
	des, _ := os.ReadDir(filepath.Join(runDir, "layers"))
	for _, d := range des {
		vid, layer, ok := strings.Cut(d.Name(), ".")
		if !ok || strings.HasPrefix(d.Name(), ".") || (id != "" && vid != id) {
			continue
		}
		n, err := strconv.ParseUint(layer, 10, 64)
		if err != nil {
			t.Fatalf("entry %s", d.Name())
		}
		entries = append(entries, n)
		var m struct{ Parent string }
		if b, err := os.ReadFile(filepath.Join(runDir, "layers", d.Name(), "meta.json")); err == nil {
			_ = json.Unmarshal(b, &m)
		}
		parent[n] = m.Parent
	}
	return id, entries, held, parent
}

// TestCacheFollowsVault: the layer cache's entries of layers that a
// checkpoint prune (which compacts), a gc after a restore, a compaction
// and a vault delete free are gone after each, unless an entry of a layer
// the vault still holds stands on them (compaction merges a layer into its
// child and leaves the child's state as it was, so the child's entry still
// needs the merged one below it): a run after a prune materializes
// nothing.
func TestCacheFollowsVault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs := 0
	run := func(args ...string) proxy.Result {
		t.Helper()
		r := e.exec(0, "", append(args, "--transport", "overlay", "--shell", "echo "+strconv.Itoa(runs)+" > f"+strconv.Itoa(runs))...).Result
		if r.Overlay == nil || !r.Overlay.Reused {
			t.Fatalf("run %d: the upper did not become an entry: %+v", runs, r.Overlay)
		}
		runs++
		return r
	}
	// check fails on an entry of a freed layer that no entry of a held
	// layer stands on, and returns how many entries there are and how
	// many of them are of freed layers.
	check := func(step string) (entries, freed int) {
		t.Helper()
		id, ents, held, parent := layerTree(t, e.home)
		needed := map[uint64]bool{}
		for _, l := range ents {
			for k := l; held[l] && !needed[k]; {
				needed[k] = true
				p, ok := strings.CutPrefix(parent[k], id+".")
				if !ok {
					break
				}
				n, err := strconv.ParseUint(p, 10, 64)
				if err != nil {
					break
				}
				k = n
			}
		}
		for _, l := range ents {
			if !held[l] {
				freed++
				if !needed[l] {
					t.Errorf("after %s: the cache keeps an entry of layer %d, which the vault freed and no entry stands on (held %v)", step, l, held)
				}
			}
		}
		return len(ents), freed
	}
	steps := []struct {
		name string
		args [][]string
	}{
		{"checkpoint prune", [][]string{{"checkpoint", "prune", "--keep", "1"}}},
		{"restore and gc", [][]string{{"checkpoint", "restore", "mark"}, {"gc"}}},
		{"checkpoint delete and compact", [][]string{{"checkpoint", "prune", "--runs-only", "--keep", "0"}, {"compact"}}},
	}
	for _, s := range steps {
		if s.name == "restore and gc" {
			if code, out, errOut := e.avfs("", "checkpoint", "save", "mark"); code != 0 {
				t.Fatalf("checkpoint save: %s %s", out, errOut)
			}
		}
		// Runs that keep no checkpoint: after a restore nothing names
		// their layers but the working state the restore abandons.
		var args []string
		if s.name == "restore and gc" {
			args = []string{"--checkpoint", "never"}
		}
		run(args...)
		run(args...)
		n, before := check("the runs")
		for _, a := range s.args {
			if code, out, errOut := e.avfs("", a...); code != 0 {
				t.Fatalf("%v: exit %d %s %s", a, code, out, errOut)
			}
		}
		m, kept := check(s.name)
		t.Logf("%s: %d entries -> %d, %d of freed layers kept below held ones", s.name, n, m, kept)
		if m >= n && kept <= before {
			t.Errorf("%s freed no layer the cache held (%d entries -> %d): the step tests nothing", s.name, n, m)
		}
		if s.name == "checkpoint prune" {
			if r := run(); r.Overlay.Materialized {
				t.Errorf("the run after %s materialized %d files: the entries it stands on were dropped", s.name, r.Overlay.MaterializedFiles)
			}
		}
	}
	// The next run still stands on what is left, or rebuilds what it lacks.
	r := e.exec(0, "", "--transport", "overlay", "--shell", "cat f0 f1 f2 f5 f6").Result
	if r.Stdout != "0\n1\n2\n5\n6\n" {
		t.Errorf("a run after the compaction reads %q", r.Stdout)
	}
	id, _, _ := layerEntries(t, e.home)
	if code, out, errOut := e.avfs("", "vault", "delete", "v", "--yes"); code != 0 {
		t.Fatalf("vault delete: %d %s %s", code, out, errOut)
	}
	runDir, _ := proxy.RuntimeDir(e.home, "")
	des, _ := os.ReadDir(filepath.Join(runDir, "layers"))
	for _, d := range des {
		if strings.HasPrefix(d.Name(), id+".") {
			t.Errorf("after vault delete the cache keeps %s", d.Name())
		}
	}
}
