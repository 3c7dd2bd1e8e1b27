package vfs_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The model test runs random sequences of operations against vaults and
// against a plain in-memory reference model, and requires them to agree:
// the errno of every operation, the tree of every vault's working state and
// of every checkpoint, fsck, and Diff.
//
// The model follows the vault's documented (Linux-like) order of error
// checks. Where Linux picks another errno for the same input, the model
// notes it.

func TestModel(t *testing.T) {
	for _, engine := range []string{"mem", "sqlite", "postgres", "store"} {
		t.Run(engine, func(t *testing.T) {
			checks := map[string]int{"mem": 200, "sqlite": 40, "postgres": 20, "store": 15}[engine]
			setRapidChecks(t, checks)
			root := t.TempDir()
			rapid.Check(t, func(rt *rapid.T) {
				newModelRun(rt, engine, root).run()
			})
		})
	}
}

// setRapidChecks sets how many sequences rapid.Check tries, unless the run
// chose it with -rapid.checks or RAPID_CHECKS. rapid has no per-call
// setting, so the flag is set and restored. (-short divides it by 5.)
func setRapidChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || rapidChecksChosen() {
		return
	}
	old := f.Value.String()
	if err := flag.Set(f.Name, fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(f.Name, old) })
}

// rapidChecksChosen tells whether the run set the number of checks; it is
// decided once, before setRapidChecks sets the flag itself.
var rapidChecksChosen = sync.OnceValue(func() bool {
	_, chosen := os.LookupEnv("RAPID_CHECKS")
	flag.Visit(func(g *flag.Flag) { chosen = chosen || g.Name == "rapid.checks" })
	return chosen
})

// Vaults and checkpoints of the model.

// mvault is one vault: the open handle and its model.
type mvault struct {
	name   string
	v      *vfs.Vault
	eng    kv.Engine // the memory engine, to reopen it
	work   *mnode
	cps    map[string]*mnode
	parent *mvault // nil unless a fork
	forks  int     // live forks standing on this vault
}

type modelRun struct {
	t      *rapid.T
	engine string
	home   *registry.Home // nil for the memory engine
	vaults []*mvault
	cur    *mvault
}

var errAbort = errors.New("transaction aborted by the test")

func newModelRun(t *rapid.T, engine, tmpRoot string) *modelRun {
	r := &modelRun{t: t, engine: engine}
	mv := &mvault{name: "v", work: newMDir(0o755), cps: map[string]*mnode{}}
	var err error
	switch engine {
	case "mem":
		mv.eng = engines.NewMemory()
		mv.v, err = vfs.Create(mv.eng, mv.name, vfs.Quota{})
	case "postgres":
		// One vault on its own engine, as the memory one; "store" runs
		// the vaults of a home in a store, forks and the shared chunk
		// space included.
		var db *postgres.DB
		if db, err = postgres.Create(pgtest.DSN(t), nil); err == nil {
			mv.eng = db
			t.Cleanup(func() { db.Close() })
			mv.v, err = vfs.Create(mv.eng, mv.name, vfs.Quota{})
		}
	default:
		dir, derr := os.MkdirTemp(tmpRoot, "home")
		if derr != nil {
			t.Fatal(derr)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		var opts registry.Options
		create := registry.CreateOptions{Engine: engine}
		if engine == "store" {
			opts.Store, create.Engine = pgtest.DSN(t), "" // the store's engine
		}
		if r.home, err = registry.OpenWith(dir, opts); err == nil {
			mv.v, err = r.home.Create(mv.name, create)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	r.vaults = []*mvault{mv}
	r.cur = mv
	t.Cleanup(func() {
		for _, mv := range r.vaults {
			mv.v.Close()
		}
	})
	return r
}

// run draws and performs a sequence of steps, checking the vault's working
// state after each, then checks everything.
func (r *modelRun) run() {
	t := r.t
	actions := []string{"op", "op", "op", "op", "op", "op", "op", "op", "op", "op", "op", "op",
		"batch", "batch", "save", "save", "restore", "delete-cp", "switch", "compact", "reopen"}
	if r.home != nil {
		actions = append(actions, "fork", "fork", "delete-vault")
	}
	steps := rapid.IntRange(1, map[string]int{"mem": 60, "sqlite": 40, "postgres": 40, "store": 40}[r.engine]).Draw(t, "steps")
	for range steps {
		switch a := rapid.SampledFrom(actions).Draw(t, "action"); a {
		case "op":
			r.transaction(1)
		case "batch":
			r.transaction(rapid.IntRange(2, 5).Draw(t, "batch"))
		case "save":
			r.save()
		case "restore":
			r.restore()
		case "delete-cp":
			r.deleteCheckpoint()
		case "switch":
			r.cur = rapid.SampledFrom(r.vaults).Draw(t, "vault")
			t.Logf("switch to %s", r.cur.name)
		case "compact":
			r.compact()
		case "reopen":
			r.reopen(r.cur)
		case "fork":
			r.fork()
		case "delete-vault":
			r.deleteVault()
		}
		r.checkState(r.cur, "", r.cur.work)
	}
	for _, mv := range r.vaults {
		r.checkVault(mv)
	}
}

// transaction runs n operations in one Update. The first failing one (which
// must fail as the model says) aborts it; sometimes the test aborts it after
// all succeeded. Either way the model must stay as it was.
func (r *modelRun) transaction(n int) {
	t, mv := r.t, r.cur
	scratch := cloneTree(mv.work)
	var ops []*fsOp
	var want []syscall.Errno
	for range n {
		o := drawOp(t, scratch)
		e := o.apply(scratch)
		ops, want = append(ops, o), append(want, e)
		if e != 0 {
			break
		}
	}
	abort := want[len(want)-1] == 0 && rapid.IntRange(0, 9).Draw(t, "abort") == 0
	var mismatch string
	err := mv.v.Update(func(tx *vfs.Tx) error {
		for i, o := range ops {
			err := o.run(tx)
			if !errnoIs(err, want[i]) {
				mismatch = fmt.Sprintf("%s in %s: got %v, want %s", o, mv.name, err, errnoName(want[i]))
				return errAbort
			}
			if err != nil {
				return err
			}
		}
		if abort {
			return errAbort
		}
		return nil
	})
	for i, o := range ops {
		t.Logf("%s: %s => %s", mv.name, o, errnoName(want[i]))
	}
	if mismatch != "" {
		t.Fatalf("%s", mismatch)
	}
	last := want[len(want)-1]
	switch {
	case abort:
		t.Logf("(aborted)")
		if !errors.Is(err, errAbort) {
			t.Fatalf("aborted transaction returned %v", err)
		}
	case last != 0:
		if !errors.Is(err, last) {
			t.Fatalf("transaction failing with %s returned %v", errnoName(last), err)
		}
	case err != nil:
		t.Fatalf("transaction: %v", err)
	default:
		mv.work = scratch
	}
}

var checkpointNames = []string{"c0", "c1", "c2", "c3", "c4"}

func (r *modelRun) save() {
	t, mv := r.t, r.cur
	name := rapid.SampledFrom(append(checkpointNames, "")).Draw(t, "checkpoint")
	cp, err := mv.v.SaveCheckpoint(name, "model")
	t.Logf("%s: checkpoint save %q => %v", mv.name, name, err)
	if _, taken := mv.cps[name]; taken {
		if !errs.Is(err, errs.AlreadyExists) || !errors.Is(err, syscall.EEXIST) {
			t.Fatalf("saving checkpoint %q twice: %v", name, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("checkpoint save: %v", err)
	}
	if name != "" && cp.Name != name {
		t.Fatalf("checkpoint saved as %q, want %q", cp.Name, name)
	}
	if _, taken := mv.cps[cp.Name]; taken {
		t.Fatalf("generated checkpoint name %q is taken", cp.Name)
	}
	mv.cps[cp.Name] = cloneTree(mv.work)
}

// drawCheckpoint picks one of the vault's checkpoints, or a missing name.
func (r *modelRun) drawCheckpoint() string {
	names := slices.Sorted(maps.Keys(r.cur.cps))
	return rapid.SampledFrom(append(names, "missing")).Draw(r.t, "checkpoint")
}

func (r *modelRun) restore() {
	t, mv := r.t, r.cur
	name := r.drawCheckpoint()
	err := mv.v.RestoreCheckpoint(name)
	t.Logf("%s: checkpoint restore %q => %v", mv.name, name, err)
	cp, ok := mv.cps[name]
	if !ok {
		if !errs.Is(err, errs.CheckpointNotFound) || !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("restore of a missing checkpoint: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	mv.work = cloneTree(cp)
}

func (r *modelRun) deleteCheckpoint() {
	t, mv := r.t, r.cur
	name := r.drawCheckpoint()
	err := mv.v.DeleteCheckpoint(name)
	t.Logf("%s: checkpoint delete %q => %v", mv.name, name, err)
	if _, ok := mv.cps[name]; !ok {
		if !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("delete of a missing checkpoint: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("checkpoint delete: %v", err)
	}
	delete(mv.cps, name)
}

func (r *modelRun) compact() {
	t, mv := r.t, r.cur
	if r.home != nil && rapid.Bool().Draw(t, "through-registry") {
		cs, gs, err := r.home.Compact(mv.name)
		t.Logf("%s: registry compact => %+v %+v %v", mv.name, cs, gs, err)
		if err != nil {
			t.Fatalf("compact: %v", err)
		}
		return
	}
	cs, err := mv.v.Compact()
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	var gs vfs.GCStats
	if r.home != nil {
		var st registry.GCStats
		st, err = r.home.GC(mv.v) // in a store: every vault's chunks
		gs = st.GCStats
	} else {
		gs, err = mv.v.GC()
	}
	t.Logf("%s: compact+gc => %+v %+v %v", mv.name, cs, gs, err)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
}

// reopen gives the vault a fresh handle. A memory engine loses its data
// when closed, so there the old handle is dropped instead.
func (r *modelRun) reopen(mv *mvault) {
	t := r.t
	t.Logf("%s: reopen", mv.name)
	var err error
	if r.home == nil {
		mv.v, err = vfs.Open(mv.eng, nil)
	} else {
		if err = mv.v.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		mv.v, err = r.home.Open(mv.name)
	}
	if err != nil {
		t.Fatalf("reopen %s: %v", mv.name, err)
	}
}

func (r *modelRun) fork() {
	t := r.t
	if len(r.vaults) >= 4 {
		return
	}
	name := ""
	for i := 1; name == ""; i++ {
		name = fmt.Sprint("f", i)
		for _, mv := range r.vaults {
			if mv.name == name {
				name = ""
			}
		}
	}
	parent := r.cur
	v, err := r.home.Fork(parent.name, name)
	t.Logf("fork %s -> %s => %v", parent.name, name, err)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	mv := &mvault{name: name, v: v, work: cloneTree(parent.work), cps: map[string]*mnode{}, parent: parent}
	parent.forks++
	r.vaults = append(r.vaults, mv)
	r.cur = mv
}

// deleteVault deletes a fork; one that has forks of its own is refused.
func (r *modelRun) deleteVault() {
	t := r.t
	var forks []*mvault
	for _, mv := range r.vaults {
		if mv.parent != nil {
			forks = append(forks, mv)
		}
	}
	if len(forks) == 0 {
		return
	}
	mv := rapid.SampledFrom(forks).Draw(t, "fork")
	if mv.forks > 0 {
		err := r.home.Delete(mv.name)
		t.Logf("delete vault %s (has forks) => %v", mv.name, err)
		if !errs.Is(err, errs.VaultHasForks) {
			t.Fatalf("delete of a vault with forks: %v", err)
		}
		return
	}
	if err := mv.v.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	err := r.home.Delete(mv.name)
	t.Logf("delete vault %s => %v", mv.name, err)
	if err != nil {
		t.Fatalf("delete vault: %v", err)
	}
	mv.parent.forks--
	r.vaults = slices.DeleteFunc(r.vaults, func(x *mvault) bool { return x == mv })
	if r.cur == mv {
		r.cur = r.vaults[0]
	}
}

// Checking.

// checkVault compares every state of a vault with the model, runs fsck,
// and checks Diff from every checkpoint (and from a fork's parent) to the
// working state.
func (r *modelRun) checkVault(mv *mvault) {
	t := r.t
	r.checkState(mv, "", mv.work)
	cps, err := mv.v.Checkpoints()
	if err != nil {
		t.Fatalf("%s: checkpoints: %v", mv.name, err)
	}
	var names []string
	for _, cp := range cps {
		names = append(names, cp.Name)
	}
	slices.Sort(names)
	if want := slices.Sorted(maps.Keys(mv.cps)); !slices.Equal(names, want) {
		t.Fatalf("%s: checkpoints %q, want %q", mv.name, names, want)
	}
	for _, name := range names {
		r.checkState(mv, name, mv.cps[name])
	}
	rep, err := mv.v.Fsck()
	if err != nil {
		t.Fatalf("%s: fsck: %v", mv.name, err)
	}
	if !rep.OK() {
		t.Fatalf("%s: fsck found problems:\n%s", mv.name, strings.Join(rep.Problems, "\n"))
	}
	for _, name := range names {
		r.checkDiff(vfs.StateRef{Vault: mv.v, Checkpoint: name}, vfs.StateRef{Vault: mv.v}, mv.cps[name], mv.work)
	}
	if mv.parent != nil {
		r.checkDiff(vfs.StateRef{Vault: mv.parent.v}, vfs.StateRef{Vault: mv.v}, mv.parent.work, mv.work)
	}
}

func (r *modelRun) checkState(mv *mvault, checkpoint string, want *mnode) {
	run := mv.v.View
	label := mv.name + " working state"
	if checkpoint != "" {
		run = func(fn func(*vfs.Tx) error) error { return mv.v.ViewAt(checkpoint, fn) }
		label = mv.name + " checkpoint " + checkpoint
	}
	if err := run(func(tx *vfs.Tx) error { return compareTree(tx, want) }); err != nil {
		r.t.Fatalf("%s differs from the model: %v", label, err)
	}
}

func (r *modelRun) checkDiff(from, to vfs.StateRef, a, b *mnode) {
	cs, err := vfs.Diff(from, to)
	if err != nil {
		r.t.Fatalf("diff: %v", err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Path+" "+string(c.Kind))
	}
	slices.Sort(got)
	want := modelDiff(a, b)
	if !slices.Equal(got, want) {
		r.t.Fatalf("diff %s@%q -> %s@%q:\n got  %q\n want %q", from.Vault.Name(), from.Checkpoint,
			to.Vault.Name(), to.Checkpoint, got, want)
	}
}

// modelDiff lists "path kind" for every path whose type, content (data,
// symlink target, xattrs) or mode differs between two states, sorted.
func modelDiff(a, b *mnode) []string {
	fa, fb := flatten(a), flatten(b)
	var out []string
	for p, na := range fa {
		nb, ok := fb[p]
		var kind vfs.ChangeKind
		switch {
		case !ok:
			kind = vfs.Deleted
		case na.typ != nb.typ:
			kind = vfs.TypeChanged
		case !bytes.Equal(na.data, nb.data) || na.target != nb.target || !maps.EqualFunc(na.xattrs, nb.xattrs, bytes.Equal):
			kind = vfs.Modified
		case na.mode != nb.mode:
			kind = vfs.ModeChanged
		default:
			continue
		}
		out = append(out, p+" "+string(kind))
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			out = append(out, p+" "+string(vfs.Added))
		}
	}
	slices.Sort(out)
	return out
}
