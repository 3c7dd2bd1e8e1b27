package proxy_test

import (
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
	}
	return id, entries, held
}

// TestCacheFollowsVault: the layer cache's entries of layers that a
// checkpoint prune (which compacts), a gc after a restore, a compaction
// and a vault delete free are gone after each; the entries of layers the
// vault still holds stay.
func TestCacheFollowsVault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs := 0
	run := func(args ...string) {
		t.Helper()
		r := e.exec(0, "", append(args, "--transport", "overlay", "--shell", "echo "+strconv.Itoa(runs)+" > f"+strconv.Itoa(runs))...).Result
		if r.Overlay == nil || !r.Overlay.Reused {
			t.Fatalf("run %d: the upper did not become an entry: %+v", runs, r.Overlay)
		}
		runs++
	}
	check := func(step string) int {
		t.Helper()
		_, ents, held := layerEntries(t, e.home)
		for _, l := range ents {
			if !held[l] {
				t.Errorf("after %s: the cache keeps an entry of layer %d, which the vault freed (held %v)", step, l, held)
			}
		}
		return len(ents)
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
		n := check("the runs")
		for _, a := range s.args {
			if code, out, errOut := e.avfs("", a...); code != 0 {
				t.Fatalf("%v: exit %d %s %s", a, code, out, errOut)
			}
		}
		m := check(s.name)
		t.Logf("%s: %d entries -> %d", s.name, n, m)
		if m >= n {
			t.Errorf("%s freed no layer the cache held (%d entries -> %d): the step tests nothing", s.name, n, m)
		}
	}
	// The next run still stands on what is left, or rebuilds what it lacks.
	r := e.exec(0, "", "--transport", "overlay", "--shell", "cat f0 f1 f4 f5").Result
	if r.Stdout != "0\n1\n4\n5\n" {
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
