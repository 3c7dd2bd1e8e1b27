//go:build linux

package overlay

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Run is one overlay mount over a checkpoint of a vault, with its own
// upper dir, from Start to Finish. Its dir in the cache holds:
//
//	.run-<id>/pending.json   which vault, layer and lowers the upper belongs to
//	.run-<id>/upper, work    the overlay's upper and work dirs
//	.run-<id>/rw/upper, work the same on a tmpfs of the run's own, for a
//	                         vault with a size quota (upperBound)
//	.run-<id>/merged         the mountpoint
//
// A run whose process died leaves its dir: Recover finds it at the next
// start and ingests it, or removes it when its ingest had committed.
type Run struct {
	Dir      string
	Merged   string
	Prepared Prepared
	cache    *Cache
	pending  pending
	lease    Lease
	mounted  bool
	// printed is the upper's fingerprint at the last Persist that
	// ingested it (upperPrint), zero when none may be trusted.
	printed [32]byte
	// detached: the overlay was detached while files in it were open.
	// Those may still write into the upper, so the upper is ingested but
	// never adopted as a cached layer (lower dirs must not change).
	detached bool
	// upperStats is what the last ingest of Persist found in the upper.
	upperStats IngestStats
	// paths is what the upper held at the last PersistOnto, and onto
	// says one ingested (chain.go).
	paths map[string]sig
	onto  bool
}

// pending is a run's pending.json.
type pending struct {
	VaultID string `json:"vault_id"`
	// Vault is the vault's name at the start: what a command opening a
	// vault by name looks for (Waiting) before it opens anything.
	Vault string `json:"vault,omitempty"`
	// Top is the writable layer at the start: the ingest writes into it
	// and seals it, so a top that moved on means the ingest committed.
	Top    uint64 `json:"top"`
	Base   uint64 `json:"base"`   // the frozen layer the run's state stands on
	Parent string `json:"parent"` // key of the lowers' newest entry
	Format Format `json:"format"`
	Merged string `json:"merged"` // the mountpoint
	// BootID is the host's boot the run was mounted in, volatile (no
	// sync of its upper): an upper left by a boot that has ended may
	// have lost any part of what the run wrote. "": synced as usual.
	BootID string `json:"boot_id,omitempty"`
	// Persisted is the layer the last Persist wrote (0: none yet). A
	// checkpoint saved while the mount lives freezes it; the next ingest
	// then starts over the base again (vfs.Vault.UpdateOver's also), and
	// Recover knows the run is still pending.
	Persisted uint64 `json:"persisted,omitempty"`
	// Bound is the size of the tmpfs at rw/ that holds the upper and work
	// dirs (0: they are plain dirs of the run's dir).
	Bound int64 `json:"bound,omitempty"`
}

// upper and work are the overlay's upper and work dirs of run dir dir.
func (p pending) upper(dir string) string { return filepath.Join(p.rw(dir), "upper") }
func (p pending) work(dir string) string  { return filepath.Join(p.rw(dir), "work") }

func (p pending) rw(dir string) string {
	if p.Bound > 0 {
		return filepath.Join(dir, "rw")
	}
	return dir
}

// removeRun removes run dir dir, its tmpfs unmounted first.
func removeRun(dir string, p pending) error {
	if p.Bound > 0 {
		_ = Unmount(p.rw(dir)) // gone with a reboot, or with the run's namespace
	}
	return hostErr("overlay run", dir, removeAll(dir))
}

const runPrefix = ".run-"

// Start mounts the working state of v at target (a dir of the run's
// own when ""): its frozen layers as lowers under a fresh upper dir. The
// working state is first made an empty layer over a frozen one of v's own
// file (Seal), which is what the run ingests over; a proxy run has just
// saved its checkpoint, so nothing needs sealing.
func (c *Cache) Start(ctx context.Context, v *vfs.Vault, id, target string) (*Run, error) {
	return c.start(ctx, v, id, target, false, true)
}

// StartReadOnly is Start for a run that writes nothing: the mount refuses
// writes with EROFS, and Discard ends it.
func (c *Cache) StartReadOnly(ctx context.Context, v *vfs.Vault, id, target string) (*Run, error) {
	return c.start(ctx, v, id, target, true, true)
}

// StartUnmounted is Start for a run whose overlay is mounted elsewhere:
// in the user namespace of the command (EnterCommand with Stack), which
// is the only place that sees it. Everything else is as Start: the
// lowers are leased, pending.json written, and Finish ingests the upper.
func (c *Cache) StartUnmounted(ctx context.Context, v *vfs.Vault, id, target string) (*Run, error) {
	return c.start(ctx, v, id, target, false, false)
}

// Stack is what the run's overlay is made of.
func (r *Run) Stack() Stack {
	return Stack{Lowers: r.Prepared.Lowers, Upper: r.upper(), Work: r.work(), Format: r.pending.Format}
}

func (c *Cache) start(ctx context.Context, v *vfs.Vault, id, target string, ro, mount bool) (*Run, error) {
	if ctx.Err() != nil {
		return nil, errs.Stopped(ctx, "overlay run")
	}
	r := &Run{cache: c, Dir: filepath.Join(c.Root, runPrefix+id), Merged: target}
	if target == "" {
		r.Merged = filepath.Join(r.Dir, "merged")
	}
	top, base, err := standOnFrozen(v)
	if err != nil {
		return nil, err
	}
	prep, err := c.Prepare(ctx, v, base, &r.lease)
	if err != nil {
		return nil, err
	}
	r.Prepared = prep
	r.pending = pending{VaultID: v.ID(), Vault: v.Name(), Top: top, Base: base, Parent: prep.Top, Format: c.Format, Merged: r.Merged}
	// A run's read-write upper is ingested, then adopted as an entry of
	// this boot or removed, and never mounted again, so a volatile
	// cache's mount skips syncing it, unless the boot cannot be named.
	volatile := false
	if id := currentBoot(); !ro && c.Volatile && id != "" {
		r.pending.BootID, volatile = id, true
	}
	if !ro {
		if r.pending.Bound, err = upperBound(v); err != nil {
			r.lease.Release()
			return nil, err
		}
	}
	if err := os.Mkdir(r.Dir, 0o755); err != nil {
		r.lease.Release()
		return nil, hostErr("overlay run", r.Dir, err)
	}
	// pending.json first: a crash right after the tmpfs is mounted
	// leaves a run dir that Recover finds and takes away, mount and all.
	if err := r.writePending(); err != nil {
		r.abandon()
		return nil, err
	}
	bound := r.pending.Bound
	if err := r.makeDirs(target == ""); err != nil {
		r.abandon()
		return nil, err
	}
	if r.pending.Bound != bound {
		if err := r.writePending(); err != nil {
			r.abandon()
			return nil, err
		}
	}
	if !mount {
		_ = c.DropFreed(v)
		return r, nil
	}
	if err := Mount(Stack{Lowers: prep.Lowers, Data: prep.Data, Upper: r.upper(), Work: r.work(), Format: c.Format, ReadOnly: ro, Volatile: volatile}, r.Merged); err != nil {
		r.abandon()
		return nil, err
	}
	r.mounted = true
	// Entries of layers freed by a process that could not drop them (a
	// mount held them then) go now; the run's own lowers are held.
	_ = c.DropFreed(v)
	return r, nil
}

// standOnFrozen makes v's working state an empty layer whose parent is a
// frozen layer of v's own file, sealing what it must, and returns both.
func standOnFrozen(v *vfs.Vault) (top, base uint64, err error) {
	for range 3 {
		layers, err := v.StateLayers("")
		if err != nil {
			return 0, 0, err
		}
		if len(layers) >= 2 && layers[0].Empty && !layers[0].Frozen && layers[1].VaultID == v.ID() && layers[1].Frozen {
			return layers[0].Layer, layers[1].Layer, nil
		}
		if err := v.Seal(); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, &errs.Error{Kind: errs.VaultLocked, Op: "overlay run", Vault: v.Name(),
		Err: errors.New("another writer keeps writing the vault's working state")}
}

func (r *Run) upper() string { return r.pending.upper(r.Dir) }
func (r *Run) work() string  { return r.pending.work(r.Dir) }

// makeDirs makes the upper and work dirs, on the run's tmpfs when it has
// a bound, and the mountpoint when the run has its own.
func (r *Run) makeDirs(ownMerged bool) error {
	if r.pending.Bound > 0 {
		rw := r.pending.rw(r.Dir)
		if err := os.Mkdir(rw, 0o755); err != nil {
			return hostErr("overlay run", rw, err)
		}
		if err := mountBound(rw, r.pending.Bound); err != nil {
			if !errors.Is(err, unix.EPERM) {
				r.pending.Bound = 0 // nothing to unmount
				return err
			}
			// Where this process may not mount a tmpfs, the upper is
			// unbounded and only the ingest checks.
			r.pending.Bound = 0
			_ = os.Remove(rw)
		}
	}
	dirs := []string{r.upper(), r.work()}
	if ownMerged {
		dirs = append(dirs, r.Merged)
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return hostErr("overlay run", d, err)
		}
	}
	return nil
}

// UpperBound is the size of the tmpfs the run's upper is on (0: the
// upper is not bounded, see upperBound).
func (r *Run) UpperBound() int64 { return r.pending.Bound }

func (r *Run) abandon() {
	if r.mounted {
		_ = Unmount(r.Merged)
		r.mounted = false
	}
	r.lease.Release()
	_ = removeRun(r.Dir, r.pending)
}

// Discard unmounts the run and throws its upper dir away: a read-only
// run, or a run whose command failed to start.
func (r *Run) Discard() error {
	var err error
	if r.mounted {
		err = Unmount(r.Merged)
		r.mounted = false
	}
	r.lease.Release()
	return errors.Join(err, removeRun(r.Dir, r.pending))
}

// Persist makes what the run wrote so far v's working state: the upper
// ingested over the run's base, the mount going on. Finish ingests the
// whole upper over the base again, replacing what Persist wrote.
//
// An upper unchanged since the last Persist is not ingested again while
// the working state is still the layer that Persist wrote. Once a
// checkpoint has frozen that layer it is ingested again, over the base:
// the working state then stands on the base or on the last persisted
// layer, never deeper, which is what UpdateOver and Recover rely on.
func (r *Run) Persist(v *vfs.Vault) error {
	print, trusted := upperPrint(r.upper())
	if trusted && print == r.printed && r.pending.Persisted != 0 {
		ls, err := v.StateLayers("")
		if err == nil && len(ls) > 0 && ls[0].Layer == r.pending.Persisted && !ls[0].Frozen {
			return nil
		}
	}
	r.printed = [32]byte{}
	var st IngestStats
	s, err := v.UpdateOver(r.pending.Base, false, func(tx *vfs.Tx) (err error) {
		st, err = Ingest(tx, r.upper(), r.pending.Format)
		return err
	}, r.also()...)
	if err != nil {
		return err
	}
	r.upperStats = st
	if s.Layer != r.pending.Persisted {
		// Written before the caller hears of the persist: only then may a
		// checkpoint freeze the layer.
		r.pending.Persisted = s.Layer
		if err := r.writePending(); err != nil {
			return err
		}
	}
	if trusted {
		r.printed = print
	}
	return nil
}

// also is the layer an ingest may find the working state standing on
// besides the base (pending.Persisted).
func (r *Run) also() []uint64 { return persistedOf(r.pending) }

func persistedOf(p pending) []uint64 {
	if p.Persisted == 0 {
		return nil
	}
	return []uint64{p.Persisted}
}

func (r *Run) writePending() error {
	b, _ := json.Marshal(r.pending)
	path := filepath.Join(r.Dir, "pending.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return hostErr("overlay run", r.Dir, err)
	}
	return hostErr("overlay run", r.Dir, os.Rename(tmp, path))
}

// Unmount unmounts the run's overlay and keeps its upper for Finish or
// Reset. A mount in use is refused (EBUSY, as the kernel says it) and
// stays, unless lazy: then it is detached, and what is written through
// the files still open is not the vault's.
func (r *Run) Unmount(lazy bool) error {
	if !r.mounted {
		return nil
	}
	err := unix.Unmount(r.Merged, 0)
	if errors.Is(err, unix.EBUSY) && lazy {
		err = unix.Unmount(r.Merged, unix.MNT_DETACH)
		r.detached = err == nil
	}
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	r.mounted = false
	return nil
}

// Reset throws the run away as Discard does and makes v's working state
// the run's base again, dropping what earlier Persists wrote: the vault
// is as it was when the run started (checkpoints saved meanwhile stay).
func (r *Run) Reset(v *vfs.Vault) error {
	if _, err := v.UpdateOver(r.pending.Base, false, func(*vfs.Tx) error { return nil }, r.also()...); err != nil {
		return err
	}
	return r.Discard()
}

// Finish unmounts the run and ingests its upper into v's top layer, then
// seals that layer, in one transaction. On error (QuotaExceeded, say) the
// vault is as it was before the run and the run dir is removed: the
// run's writes are refused as a whole.
func (r *Run) Finish(v *vfs.Vault) (Finished, error) {
	var fin Finished
	var gone error
	if r.mounted {
		if !isMountpoint(r.Merged) {
			// Something in the run unmounted it: what it wrote after went
			// to the host dir beneath, not the upper.
			gone = &errs.Error{Kind: errs.IoError, Op: "overlay run", Path: r.Merged,
				Err: errors.New("the workspace was unmounted during the run: writes made after that are not in the vault")}
		} else if err := r.Unmount(true); err != nil {
			return fin, hostErr("overlay run", r.Merged, err)
		}
		r.mounted = false
	}
	defer r.lease.Release()
	start := time.Now()
	c := r.cache
	if r.detached {
		c = nil
	}
	fin, err := ingestRun(v, r.Dir, r.pending, c)
	fin.Ms, fin.UpperBound = since(start), r.pending.Bound
	return fin, errors.Join(err, gone)
}

// ingestRun ingests the upper of run dir and disposes of the dir: adopted
// into the cache c, or removed (always, when c is nil).
func ingestRun(v *vfs.Vault, dir string, p pending, c *Cache) (Finished, error) {
	var fin Finished
	upper := p.upper(dir)
	sealed, err := v.UpdateOver(p.Base, true, func(tx *vfs.Tx) error {
		var err error
		fin.Stats, err = Ingest(tx, upper, p.Format)
		return err
	}, persistedOf(p)...)
	fin.Sealed = sealed
	if err != nil {
		_ = removeRun(dir, p)
		return fin, err
	}
	// The upper is the layer's form only when the layer holds nothing
	// else: no other writer wrote into it before the ingest, and it is
	// the layer the run started over (no restore moved the top).
	if c != nil && sealed.WasEmpty && !sealed.Unchanged {
		if err := c.Adopt(upper, Key(v.ID(), sealed.Layer), p.Parent, fin.Stats); err == nil {
			fin.Adopted = true
		}
	}
	_ = removeRun(dir, p)
	return fin, nil
}

// Recover finds the runs of vault v that a crash left (their process is
// gone: the caller holds the vault's run lock) and finishes each: one
// whose ingest had committed (v's working state no longer stands on the
// run's base) is
// removed; one whose ingest had not is ingested now, whole or not at all.
func (c *Cache) Recover(v *vfs.Vault) ([]Recovered, error) {
	des, err := os.ReadDir(c.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, hostErr("layer cache", c.Root, err)
	}
	var out []Recovered
	for _, d := range des {
		if !strings.HasPrefix(d.Name(), runPrefix) {
			continue
		}
		dir := filepath.Join(c.Root, d.Name())
		var p pending
		b, err := os.ReadFile(filepath.Join(dir, "pending.json"))
		if err != nil || json.Unmarshal(b, &p) != nil {
			continue // being started, or not a run: once a minute old, Prune takes it
		}
		if p.VaultID != v.ID() {
			continue
		}
		if p.Merged != "" {
			_ = Unmount(p.Merged)
		}
		rec := Recovered{Dir: dir}
		if _, err := os.Lstat(p.upper(dir)); errors.Is(err, os.ErrNotExist) {
			// Died while starting (the command never ran), or the
			// upper's tmpfs went with a reboot: nothing to ingest.
			rec.Err = removeRun(dir, p)
			if rec.Err == nil && p.Bound > 0 {
				rec.Err = &errs.Error{Kind: errs.IoError, Op: "overlay run", Path: dir,
					Err: errors.New("the run's upper dir is gone (it was on a tmpfs; a reboot takes it): nothing of the run reached the vault")}
			}
			out = append(out, rec)
			continue
		}
		layers, err := v.StateLayers("")
		if err != nil {
			return out, err
		}
		// Not committed while the working state still stands on the
		// run's base, or on what its last Persist wrote: the final ingest
		// seals a layer of its own and moves past both.
		committed := !(len(layers) > 1 && !layers[0].Frozen && layers[1].VaultID == p.VaultID &&
			(layers[1].Layer == p.Base || (p.Persisted != 0 && layers[1].Layer == p.Persisted)))
		switch {
		case !committed && p.BootID != "" && p.BootID != currentBoot():
			// The host restarted during the run, whose upper was not
			// synced: all of it or none, and all is not known.
			_ = removeRun(dir, p)
			rec.Err = &errs.Error{Kind: errs.IoError, Op: "overlay recover", Path: dir,
				Err: errors.New("the host restarted during the run: its writes were not synced and are dropped; the vault is as before the run")}
		case !committed:
			_, rec.Err = ingestRun(v, dir, p, c)
			rec.Ingested = rec.Err == nil
		default:
			_ = removeRun(dir, p)
		}
		out = append(out, rec)
	}
	return out, nil
}

// Pending lists the run dirs of vault id that wait for an ingest: what
// fsck reports while no run has recovered them. A run that is live has
// one too: the caller tells them apart by the vault's writer lock.
func (c *Cache) Pending(vaultID string) []string {
	var out []string
	for _, r := range c.runs() {
		if r.p.VaultID == vaultID {
			out = append(out, r.dir)
		}
	}
	return out
}

// Waiting reports whether a run dir may be of the vault named name (its
// pending.json names it, or names no vault at all): a look at the
// cache's dir alone, cheap enough for every open of a vault.
func (c *Cache) Waiting(name string) bool {
	for _, r := range c.runs() {
		if r.p.Vault == name || r.p.Vault == "" {
			return true
		}
	}
	return false
}

type runDir struct {
	dir string
	p   pending
}

// runs reads the pending.json of every run dir; a dir without one is
// being started, or is not a run.
func (c *Cache) runs() []runDir {
	des, _ := os.ReadDir(c.Root)
	var out []runDir
	for _, d := range des {
		if !strings.HasPrefix(d.Name(), runPrefix) {
			continue
		}
		var p pending
		dir := filepath.Join(c.Root, d.Name())
		b, err := os.ReadFile(filepath.Join(dir, "pending.json"))
		if err == nil && json.Unmarshal(b, &p) == nil {
			out = append(out, runDir{dir, p})
		}
	}
	return out
}

// currentBoot names the host's current boot ("": unknown). A process
// lives in one boot: it is read once.
var currentBoot = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
})

// isMountpoint reports whether dir is the root of a mount: its device
// differs from its parent's.
func isMountpoint(dir string) bool {
	var st, pst unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &pst) != nil {
		return false
	}
	return st.Dev != pst.Dev
}
