//go:build linux

package overlay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Cache holds materialized layers under one directory:
//
//	<vault id>.<layer>/meta.json   what the entry is (entryMeta)
//	<vault id>.<layer>/tree/       the layer in overlayfs format
//	<vault id>.<layer>/refs        the store files the tree redirects to (Shared)
//	.store/                        the Shared layout's data files (store.go)
//	.tmp-<random>/                 an entry being written, never read
//	.run-<id>/upper, work, merged  a run's upper dir (Run)
//
// An entry is keyed by the vault file and layer that hold the state it
// shows, so every fork standing on that layer finds it. It is written
// under a temporary name and renamed into place when complete: a crash
// leaves a .tmp- dir, removed by the next Prune, never a half entry. An
// entry is a squashed base (the whole state at its layer) or a delta (a
// run's ingested upper dir over its parent entry). Entries are never
// written once in place; an entry in use holds a shared flock on its
// meta.json, and Prune takes away, least recently used first, only
// entries nobody holds.
type Cache struct {
	Root   string
	Budget int64 // bytes; 0: unbounded
	Format Format
	Layout Layout // "": Copies
	// MaxDepth is how many deltas an entry may stand on before the next
	// run squashes the state into a new base (0: 32).
	MaxDepth int
	// Volatile mounts read-write runs volatile (no sync of the upper at
	// fsync or unmount) where the boot can be named: for runs of one
	// command, ingested when it ends (transport.Spec.OneRun).
	Volatile bool
}

// entryMeta is an entry's meta.json.
type entryMeta struct {
	Parent  string    `json:"parent,omitempty"` // key of the entry below a delta
	Format  Format    `json:"format"`
	Layout  Layout    `json:"layout,omitempty"` // "": Copies
	Files   int       `json:"files"`
	Bytes   int64     `json:"bytes"`
	Shared  int64     `json:"shared_bytes,omitempty"` // size of the store files the tree names, each once
	Created time.Time `json:"created"`
	// Boot names the boot in which the entry was placed without a sync
	// (seal); a crash of the host may have lost part of it, so in another
	// boot it is dropped, not used. "": synced.
	Boot string `json:"boot,omitempty"`
}

// Key names the entry of one layer of one vault file.
func Key(vaultID string, layer uint64) string { return vaultID + "." + strconv.FormatUint(layer, 10) }

func (c *Cache) path(key string) string { return filepath.Join(c.Root, key) }

// Tree is the directory of entry key that a mount stacks.
func (c *Cache) Tree(key string) string { return filepath.Join(c.path(key), "tree") }

// Lease is a set of entries held for one mount: Prune leaves them alone
// until Release.
type Lease struct {
	files []*os.File
}

// Release lets Prune take the entries again.
func (l *Lease) Release() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

// Prepare returns the lower dirs that show the state of frozen layer
// base of v's own file, materializing a squashed base when no entry shows
// it. The layers that state reads through are walked newest first past
// empty ones to the first that holds records: its entry, if there is one
// with every entry below it, is the state.
func (c *Cache) Prepare(ctx context.Context, v *vfs.Vault, base uint64, lease *Lease) (Prepared, error) {
	start := time.Now()
	var p Prepared
	layout, err := c.layout()
	if err != nil {
		return p, err
	}
	if err := makeRoot(c.Root); err != nil {
		return p, hostErr("layer cache", c.Root, err)
	}
	layers, err := v.LayersAt(base)
	if err != nil {
		return p, err
	}
	key := ""
	for _, l := range layers {
		if !l.Empty {
			key = Key(l.VaultID, l.Layer)
			break
		}
	}
	if key == "" { // nothing at all was ever written: the bottom layer shows it
		l := layers[len(layers)-1]
		key = Key(l.VaultID, l.Layer)
	}
	if layout == Shared {
		p.Data = []string{c.storeRoot()}
	}
	if lowers, ok := c.stack(key, lease); ok {
		p.Lowers, p.Top, p.Ms = lowers, key, since(start)
		return p, nil
	}
	// A stack too deep becomes one delta over its base (merge.go).
	if st, ok, err := c.mergeDeltas(key); err != nil {
		return p, err
	} else if ok {
		if lowers, ok := c.stack(key, lease); ok {
			p.Lowers, p.Top, p.Built, p.Stats, p.Ms = lowers, key, true, st, since(start)
			return p, nil
		}
	}
	// An entry that cannot be stacked (a delta too deep, or whose parent
	// was pruned) gives way to a squashed base of the same state.
	if err := c.Drop(key); err != nil {
		return p, err
	}
	st, err := c.build(key, func(tree string, store *storeWriter) (MatStats, error) {
		var st MatStats
		err := v.ViewLayer(base, func(tx *vfs.Tx) (err error) {
			st, err = materialize(ctx, tx, tree, store)
			return err
		})
		return st, err
	})
	if err != nil {
		return p, err
	}
	lowers, ok := c.stack(key, lease)
	if !ok {
		return p, &errs.Error{Kind: errs.IoError, Op: "layer cache", Path: c.path(key), Err: errors.New("a layer just materialized is gone")}
	}
	p.Lowers, p.Top, p.Built, p.Stats, p.Ms = lowers, key, true, st, since(start)
	return p, nil
}

// layout is the cache's layout, checked.
func (c *Cache) layout() (Layout, error) {
	l, err := ParseLayout(string(c.Layout))
	if err == nil && l == Shared && c.Format != Trusted {
		err = &errs.Error{Kind: errs.InvalidInput, Op: "layer cache", Err: errors.New("the shared layout needs the trusted format"),
			Hint: "the store's stubs carry trusted.overlay.* markers; a user-namespace mount uses the copies layout"}
	}
	return l, err
}

// stack returns the trees of entry key and every entry below it, newest
// first, each leased, or false when one is missing, of another format or
// layout, or the stack is deeper than MaxDepth.
func (c *Cache) stack(key string, lease *Lease) ([]string, bool) {
	max := c.MaxDepth
	if max <= 0 {
		max = 32
	}
	var held Lease
	keys, _, ok := c.chain(key, max, &held)
	if !ok {
		return nil, false
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = c.Tree(k)
	}
	now := time.Now()
	for _, f := range held.files {
		_ = os.Chtimes(f.Name(), now, now) // the LRU's clock
	}
	lease.files = append(lease.files, held.files...)
	return out, true
}

// chain leases entry key and every entry below it and returns their keys
// and metas, newest first, or false (nothing leased) when one is missing,
// of another format or layout, or more than max deltas deep (max 0: no
// bound).
func (c *Cache) chain(key string, max int, lease *Lease) ([]string, []entryMeta, bool) {
	var keys []string
	var metas []entryMeta
	var held []*os.File
	for k := key; k != ""; {
		if max > 0 && len(keys) > max {
			for _, f := range held {
				f.Close()
			}
			return nil, nil, false
		}
		f, m, err := c.open(k)
		if err != nil || m.Format != c.Format || layoutOf(m.Layout) != layoutOf(c.Layout) {
			if f != nil {
				f.Close()
			}
			for _, f := range held {
				f.Close()
			}
			return nil, nil, false
		}
		held = append(held, f)
		keys, metas = append(keys, k), append(metas, m)
		k = m.Parent
	}
	lease.files = append(lease.files, held...)
	return keys, metas, true
}

func layoutOf(l Layout) Layout {
	if l == "" {
		return Copies
	}
	return l
}

// open takes a shared lock on entry key's meta.json and reads it.
func (c *Cache) open(key string) (*os.File, entryMeta, error) {
	var m entryMeta
	f, err := os.Open(filepath.Join(c.path(key), "meta.json"))
	if err != nil {
		return nil, m, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, m, err
	}
	// Read through the locked file, once it is known to be still the
	// entry's: a Drop that held the entry while this open waited has
	// renamed it away (the path then names nothing, or another entry).
	var fst, pst unix.Stat_t
	err = unix.Fstat(int(f.Fd()), &fst)
	if err == nil {
		err = unix.Stat(f.Name(), &pst)
	}
	if err == nil && (fst.Dev != pst.Dev || fst.Ino != pst.Ino) {
		err = os.ErrNotExist
	}
	var b []byte
	if err == nil {
		b, err = io.ReadAll(f)
	}
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil && m.Boot != "" && m.Boot != currentBoot() {
		// Placed unsynced in a boot that is over: gone, as a crash
		// may have left it half written.
		f.Close()
		c.dropStale(key)
		return nil, m, os.ErrNotExist
	}
	if err != nil {
		f.Close()
		return nil, m, err
	}
	return f, m, nil
}

// dropStale drops entry key of another boot. No mount can hold it (none
// stacks it in this boot); only a process opening it at the same moment,
// which drops it too, holds its lock for a while: a refused Drop is tried
// again, for up to 100 ms.
func (c *Cache) dropStale(key string) {
	for range 50 {
		if err := c.Drop(key); !errs.Is(err, errs.VaultLocked) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// build writes entry key through fill into a temporary dir and renames it
// into place. An entry already there (a concurrent build won) is kept.
// In the Shared layout fill writes new data files beside the tree; they
// are synced with it, then published into the store, synced again, and
// only then is the entry placed: an entry never redirects to data that a
// crash could lose. The store's lock, held shared throughout, keeps a
// Sweep from taking a data file the entry will name.
func (c *Cache) build(key string, fill func(tree string, store *storeWriter) (MatStats, error)) (MatStats, error) {
	layout, err := c.layout()
	if err != nil {
		return MatStats{}, err
	}
	tmp, err := c.tmpDir()
	if err != nil {
		return MatStats{}, err
	}
	defer removeAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return MatStats{}, hostErr("layer cache", tree, err)
	}
	var store *storeWriter
	if layout == Shared {
		lock, _, err := c.lockStore(false)
		if err != nil {
			return MatStats{}, err
		}
		defer lock.Close()
		store = newStoreWriter(c.storeRoot(), filepath.Join(tmp, "data"))
		if err := os.Mkdir(store.tmp, 0o700); err != nil {
			return MatStats{}, hostErr("layer cache", store.tmp, err)
		}
	}
	st, err := fill(tree, store)
	if err != nil {
		return st, err
	}
	if store != nil {
		if err := store.writeRefs(tmp); err != nil {
			return st, err
		}
	}
	m := entryMeta{Format: c.Format, Layout: layout, Files: st.Files, Bytes: st.Bytes - st.Stored, Created: time.Now().UTC()}
	if store != nil {
		m.Shared = store.bytes()
	}
	if err := c.seal(tmp, m, store != nil); err != nil {
		return st, err
	}
	if store != nil {
		if err := store.publish(); err != nil {
			return st, err
		}
	}
	return st, c.place(tmp, key)
}

// Adopt makes a run's upper dir, once ingested and sealed into layer key,
// the entry of that layer: a delta over parent. The upper is moved, not
// copied, when it is on the cache's filesystem; a bounded run's upper
// (on a tmpfs of its own) is copied. A layer that holds more
// than the ingest (something else wrote into it first) must not be
// adopted: the caller checks vfs.Sealed.WasEmpty.
func (c *Cache) Adopt(upper, key, parent string, st IngestStats) error {
	tmp, err := c.tmpDir()
	if err != nil {
		return err
	}
	defer removeAll(tmp)
	err = os.Rename(upper, filepath.Join(tmp, "tree"))
	if errors.Is(err, unix.EXDEV) { // a bounded run's upper, on its own tmpfs
		err = copyUpper(upper, filepath.Join(tmp, "tree"))
	}
	if err != nil {
		return hostErr("layer cache", upper, err)
	}
	if err := c.seal(tmp, entryMeta{Parent: parent, Format: c.Format, Layout: layoutOf(c.Layout), Files: st.Written + st.Dirs, Bytes: st.Bytes, Created: time.Now().UTC()}, false); err != nil {
		return err
	}
	return c.place(tmp, key)
}

func (c *Cache) tmpDir() (string, error) {
	if err := makeRoot(c.Root); err != nil {
		return "", hostErr("layer cache", c.Root, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(c.Root, ".tmp-"+hex.EncodeToString(b[:]))
	return tmp, hostErr("layer cache", tmp, os.Mkdir(tmp, 0o700))
}

// seal writes meta.json so that a rename that survives a crash names a
// whole entry: the tree is synced first (one syncfs for files written by
// many opens) when its data must outlive the boot (durable: the Shared
// layout's data files, which the store keeps for other entries), or when
// the boot cannot be named. Otherwise the entry is of this boot only
// (entryMeta.Boot): a derived copy of what the vault holds, dropped and
// made again after a reboot rather than paid for with a barrier over the
// whole host filesystem on every run (50-250 ms for 10,000 new files).
func (c *Cache) seal(tmp string, m entryMeta, durable bool) error {
	sync := durable
	if !durable {
		m.Boot = currentBoot()
		sync = m.Boot == ""
	}
	b, _ := json.Marshal(m)
	f, err := os.OpenFile(filepath.Join(tmp, "meta.json"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return hostErr("layer cache", tmp, err)
	}
	if _, err = f.Write(b); err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && sync {
		err = syncFS(tmp)
	}
	return hostErr("layer cache", tmp, err)
}

func (c *Cache) place(tmp, key string) error {
	err := os.Rename(tmp, c.path(key))
	if err != nil && (errors.Is(err, os.ErrExist) || errors.Is(err, unix.ENOTEMPTY)) {
		return nil // another run built it first: theirs is as good
	}
	return hostErr("layer cache", c.path(key), err)
}

// Entry is one cache entry as Entries lists it.
type Entry struct {
	Key    string
	Parent string
	// Bytes is what the entry's own dir holds (an estimate: data plus a
	// block a name); the store files its tree redirects to are not in it
	// (Prune counts each of those once).
	Bytes    int64
	Shared   int64 // the store files' size, each once in this entry
	LastUsed time.Time
	// Gone says the vault freed the entry's layer while another entry
	// stood on it (DropVault): it goes once none does.
	Gone bool
}

// Entries lists the complete entries, least recently used first.
func (c *Cache) Entries() ([]Entry, error) {
	des, err := os.ReadDir(c.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, hostErr("layer cache", c.Root, err)
	}
	var out []Entry
	for _, d := range des {
		if strings.HasPrefix(d.Name(), ".") || !d.IsDir() {
			continue
		}
		mp := filepath.Join(c.Root, d.Name(), "meta.json")
		fi, err := os.Stat(mp)
		if err != nil {
			continue
		}
		var m entryMeta
		if b, err := os.ReadFile(mp); err != nil || json.Unmarshal(b, &m) != nil {
			continue
		}
		_, err = os.Lstat(filepath.Join(c.Root, d.Name(), goneFile))
		out = append(out, Entry{Key: d.Name(), Parent: m.Parent, Bytes: m.Bytes + int64(m.Files)*4096, Shared: m.Shared, LastUsed: fi.ModTime(),
			Gone: err == nil})
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.LastUsed.Compare(b.LastUsed) })
	return out, nil
}

// Prune removes what a crash left (temporary dirs, run dirs that never
// wrote their pending.json and have nothing mounted, a minute old) and
// then entries, least recently used first, until the cache is within its
// budget, and sweeps the store of data files no entry names any more. A
// store file counts once, however many entries redirect to it, and
// stops counting when the last of them goes. Entries leased by a mount
// stay.
func (c *Cache) Prune() (removed []string, err error) {
	des, _ := os.ReadDir(c.Root)
	c.removeLeftovers(des)
	ents, err := c.Entries()
	if err != nil {
		return nil, err
	}
	var bound int64 // the store files counted once per entry: an upper bound
	for _, e := range ents {
		bound += e.Bytes + e.Shared
	}
	if c.Budget > 0 && bound > c.Budget {
		var total int64
		refs := map[string][]ref{}
		count := map[string]int{}
		for _, e := range ents {
			total += e.Bytes
			rs, err := c.readRefs(e.Key)
			if err != nil {
				return nil, hostErr("layer cache", c.path(e.Key), err)
			}
			refs[e.Key] = rs
			for _, r := range rs {
				if count[r.name] == 0 {
					total += r.size
				}
				count[r.name]++
			}
		}
		for _, e := range ents {
			if total <= c.Budget {
				break
			}
			if c.Drop(e.Key) == nil {
				removed = append(removed, e.Key)
				total -= e.Bytes
				for _, r := range refs[e.Key] {
					if count[r.name]--; count[r.name] == 0 {
						total -= r.size
					}
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(c.storeRoot(), "sweep")); err == nil {
		if _, err := c.Sweep(); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// Drop removes entry key unless a mount holds it (then VaultBusy). The
// entry is renamed away first, so that nobody finds it half removed.
func (c *Cache) Drop(key string) error {
	f, err := os.Open(filepath.Join(c.path(key), "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return hostErr("layer cache", c.path(key), err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return &errs.Error{Kind: errs.VaultLocked, Op: "layer cache", Path: c.path(key), Err: fmt.Errorf("the layer is in use by a mount")}
	}
	tmp, err := c.tmpDir()
	if err != nil {
		return err
	}
	c.markSweep() // before: a crash after the rename leaves the mark
	if err := os.Rename(c.path(key), filepath.Join(tmp, "gone")); err != nil {
		return hostErr("layer cache", c.path(key), err)
	}
	return hostErr("layer cache", tmp, removeAll(tmp))
}

// goneFile in an entry's dir marks it Gone.
const goneFile = "gone"

// DropVault removes the entries of a vault file that keep does not name:
// its layers that compaction or deletion freed (keep nil: all of them),
// and the store's data files only those entries redirected to. An entry
// another entry stands on stays until that one goes: compaction merges a
// layer into its child without changing the child's state, so the child's
// entry, a delta over the merged layer's, still needs it below (dropping
// it would make the next run materialize the whole state again).
func (c *Cache) DropVault(vaultID string, keep func(layer uint64) bool) error {
	ents, err := c.Entries()
	if err != nil {
		return err
	}
	var doomed []string
	for _, e := range ents {
		id, layer, ok := strings.Cut(e.Key, ".")
		if !ok || id != vaultID {
			continue
		}
		n, err := strconv.ParseUint(layer, 10, 64)
		if err == nil && keep != nil && keep(n) && !e.Gone {
			continue
		}
		doomed = append(doomed, e.Key)
	}
	doomed, err = c.dropTopsFirst(doomed, ents)
	if err != nil {
		return err
	}
	for _, key := range doomed { // stood on: marked, to go with the last entry above
		_ = os.WriteFile(filepath.Join(c.path(key), goneFile), nil, 0o600)
	}
	if _, err := os.Stat(filepath.Join(c.storeRoot(), "sweep")); err == nil {
		_, err = c.Sweep()
		return err
	}
	return nil
}

// dropTopsFirst drops the doomed entries that none of ents stands on,
// again and again, since dropping an entry may free the one below it (its
// parent); entries a mount holds stay. It returns the doomed entries left.
func (c *Cache) dropTopsFirst(doomed []string, ents []Entry) ([]string, error) {
	above := map[string]int{} // how many entries stand on each key
	parent := map[string]string{}
	for _, e := range ents {
		if e.Parent != "" {
			above[e.Parent]++
			parent[e.Key] = e.Parent
		}
	}
	for progressed := true; progressed; {
		progressed = false
		rest := doomed[:0]
		for _, key := range doomed {
			if above[key] > 0 {
				rest = append(rest, key)
				continue
			}
			err := c.Drop(key)
			switch {
			case errs.Is(err, errs.VaultLocked):
				continue // a mount holds it: the sweep at a later start takes it
			case err != nil:
				return nil, err
			}
			progressed = true
			if p, ok := parent[key]; ok {
				above[p]--
			}
		}
		doomed = rest
	}
	return doomed, nil
}

// DropFreed removes the entries of v's file whose layers v no longer
// holds: a sweep for what a Freed notice missed (an entry a mount held
// then, or a layer freed by a process that knows no cache).
func (c *Cache) DropFreed(v *vfs.Vault) error {
	ids, err := v.LayerIDs()
	if err != nil {
		return err
	}
	held := map[uint64]bool{}
	for _, id := range ids {
		held[id] = true
	}
	keep := func(l uint64) bool { return held[l] }
	if !c.anyDoomed(v.ID(), keep) {
		// Nothing to drop, the usual case at a run's start: the names
		// say so without reading every entry's meta.json (DropVault
		// reads them all to know what stands on what).
		if _, err := os.Stat(filepath.Join(c.storeRoot(), "sweep")); err == nil {
			_, err = c.Sweep()
			return err
		}
		return nil
	}
	return c.DropVault(v.ID(), keep)
}

// anyDoomed reports whether DropVault(vaultID, keep) may have an entry to
// drop or mark: one of the vault's entries whose layer keep does not name
// or that is marked Gone. It reads the cache's dir and looks for the
// vault's gone marks, nothing else.
func (c *Cache) anyDoomed(vaultID string, keep func(layer uint64) bool) bool {
	des, _ := os.ReadDir(c.Root)
	for _, d := range des {
		if strings.HasPrefix(d.Name(), ".") || !d.IsDir() {
			continue
		}
		id, layer, ok := strings.Cut(d.Name(), ".")
		if !ok || id != vaultID {
			continue
		}
		n, err := strconv.ParseUint(layer, 10, 64)
		if err != nil || !keep(n) {
			return true
		}
		if _, err := os.Lstat(filepath.Join(c.Root, d.Name(), goneFile)); err == nil {
			return true
		}
	}
	return false
}

// Forget removes everything of a deleted vault file: its entries and the
// dirs of its runs (unmounted first), none of which any state can reach
// again. Entries a mount holds stay, for a later Prune.
func (c *Cache) Forget(vaultID string) error {
	for _, r := range c.runs() {
		if r.p.VaultID != vaultID {
			continue
		}
		if r.p.Merged != "" {
			_ = Unmount(r.p.Merged)
		}
		_ = removeRun(r.dir, r.p)
	}
	return c.DropVault(vaultID, nil)
}

func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

// removeAll removes path and everything below it. A user other than root
// cannot empty its own dir of mode 0555 (a read-only dir of the vault, or
// one a run made so): each dir is opened to its owner and the removal
// tried again.
func removeAll(path string) error {
	err := os.RemoveAll(path)
	if err == nil || os.Geteuid() == 0 {
		return err
	}
	_ = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) // before WalkDir reads it
		}
		return nil
	})
	return os.RemoveAll(path)
}
