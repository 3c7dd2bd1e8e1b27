//go:build linux

package overlay

import (
	"bufio"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Layout says how the entries of a cache hold file data.
type Layout string

const (
	// Copies: every entry's tree holds whole files. The default: it won
	// the measurements (docs/architecture.md, "The layer cache's layout").
	Copies Layout = "copies"
	// Shared is composefs's shape: a base entry's tree holds sparse
	// stubs carrying overlay.metacopy and an absolute overlay.redirect
	// into the cache's one content-addressed store, which every mount
	// stacks as a data-only lower layer. A file's data is on disk once
	// across entries and forks. Trusted format only.
	Shared Layout = "shared"
)

// LayoutEnv selects the layout of the overlay transport's cache.
const LayoutEnv = "AVFS_OVERLAY_LAYOUT"

// ParseLayout reads a layout's name ("" is Copies); anything else is
// InvalidInput.
func ParseLayout(s string) (Layout, error) {
	switch Layout(s) {
	case "", Copies:
		return Copies, nil
	case Shared:
		return Shared, nil
	}
	return "", &errs.Error{Kind: errs.InvalidInput, Op: "layer cache", Err: fmt.Errorf("unknown layout %q", s),
		Hint: "the layouts are copies and shared"}
}

// The store is one directory of the cache:
//
//	.store/lock             flock: a build holds it shared, a sweep exclusive
//	.store/sweep            a Drop happened: the next Prune sweeps
//	.store/<2>/<20>         one file's data, named by its content key
//
// A name is the first 22 characters (110 bits) of the base32 content
// key (vfs.Tx.ContentKey), so that the redirect "/<2>/<20>" and the
// metacopy marker fit in an ext4 inode (a longer redirect spills into a
// 4 KiB xattr block per stub). The whole key is the data file's
// user.avfs.key: a name whose key differs is a collision, and that file
// is written as a plain copy instead. A data file is written inside its
// build's temporary dir, synced, and only then renamed into the store: a
// half-written one never has a store name.
const (
	storeDir     = ".store"
	storeKeyAttr = "user.avfs.key"
	refsFile     = "refs"
)

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func storeName(key [sha256.Size]byte) string {
	s := b32.EncodeToString(key[:])
	return s[:2] + "/" + s[2:22]
}

func (c *Cache) storeRoot() string { return filepath.Join(c.Root, storeDir) }

// ref is one data file an entry's tree redirects to.
type ref struct {
	name string
	size int64
}

// storeWriter collects the data files of one build.
type storeWriter struct {
	root  string // the store
	tmp   string // the build's data files before they are published
	refs  map[string]ref
	keys  map[string][sha256.Size]byte
	fresh []string // names written under tmp
}

func newStoreWriter(root, tmp string) *storeWriter {
	return &storeWriter{root: root, tmp: tmp, refs: map[string]ref{}, keys: map[string][sha256.Size]byte{}}
}

// find says whether the data of key is there already (in the store or
// this build), and false with the path to write it to when it is not;
// collide is true when the name holds other data.
func (s *storeWriter) find(key [sha256.Size]byte) (name, write string, found, collide bool) {
	name = storeName(key)
	if k, ok := s.keys[name]; ok {
		return name, "", k == key, k != key
	}
	v, err := getXattr(filepath.Join(s.root, name), storeKeyAttr)
	switch {
	case err == nil && string(v) == string(key[:]):
		return name, "", true, false
	case err == nil || !errors.Is(err, unix.ENOENT):
		return name, "", false, true
	}
	return name, filepath.Join(s.tmp, strings.ReplaceAll(name, "/", "-")), false, false
}

// add records that the tree redirects to name.
func (s *storeWriter) add(name string, key [sha256.Size]byte, size int64, fresh bool) {
	s.refs[name] = ref{name: name, size: size}
	s.keys[name] = key
	if fresh {
		s.fresh = append(s.fresh, name)
	}
}

// bytes is the size of the data files the tree redirects to.
func (s *storeWriter) bytes() int64 {
	var n int64
	for _, r := range s.refs {
		n += r.size
	}
	return n
}

// writeRefs writes the entry's refs file: one "name size" line per data
// file its tree redirects to.
func (s *storeWriter) writeRefs(entry string) error {
	names := make([]string, 0, len(s.refs))
	for n := range s.refs {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %d\n", n, s.refs[n].size)
	}
	return hostErr("layer cache", entry, os.WriteFile(filepath.Join(entry, refsFile), []byte(b.String()), 0o600))
}

// publish moves the build's data files into the store (the caller has
// synced them) and makes the new names durable: a few fan-out dirs are
// synced one by one, many with one syncfs. A name another build
// published meanwhile is kept: it holds the same data.
func (s *storeWriter) publish() error {
	if len(s.fresh) == 0 {
		return nil
	}
	made := map[string]bool{}
	for _, n := range s.fresh {
		dir := filepath.Join(s.root, filepath.Dir(n))
		if !made[dir] {
			if _, err := os.Stat(dir); err != nil {
				made[s.root] = true // a new fan-out dir: its name, too
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return hostErr("layer cache", dir, err)
			}
			made[dir] = true
		}
		from, to := filepath.Join(s.tmp, strings.ReplaceAll(n, "/", "-")), filepath.Join(s.root, n)
		err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			v, gerr := getXattr(to, storeKeyAttr)
			k := s.keys[n]
			if gerr == nil && string(v) == string(k[:]) {
				continue
			}
			err = fmt.Errorf("content key collision on a store name")
		}
		if err != nil {
			return hostErr("layer cache", to, err)
		}
	}
	if len(made) > 16 {
		return hostErr("layer cache", s.root, syncFS(s.root))
	}
	for dir := range made {
		if err := syncDir(dir); err != nil {
			return hostErr("layer cache", dir, err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// lockStore takes the store's lock, shared for a build, exclusive for a
// sweep (then without waiting: ok false when a build holds it).
func (c *Cache) lockStore(exclusive bool) (f *os.File, ok bool, err error) {
	if err := os.MkdirAll(c.storeRoot(), 0o700); err != nil {
		return nil, false, hostErr("layer cache", c.storeRoot(), err)
	}
	f, err = os.OpenFile(filepath.Join(c.storeRoot(), "lock"), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, false, hostErr("layer cache", c.storeRoot(), err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, hostErr("layer cache", f.Name(), err)
	}
	return f, true, nil
}

// readRefs reads the refs file of entry key; none for an entry that
// redirects nowhere (a copies entry, a delta).
func (c *Cache) readRefs(key string) ([]ref, error) {
	f, err := os.Open(filepath.Join(c.path(key), refsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ref
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, size, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(size, 10, 64)
		if !ok || err != nil || len(name) != 23 {
			return nil, fmt.Errorf("malformed refs line %q", sc.Text())
		}
		out = append(out, ref{name: name, size: n})
	}
	return out, sc.Err()
}

// markSweep notes that entries went away: the next Prune sweeps the store.
func (c *Cache) markSweep() {
	if _, err := os.Stat(c.storeRoot()); err == nil {
		_ = os.WriteFile(filepath.Join(c.storeRoot(), "sweep"), nil, 0o600)
	}
}

// Sweep removes the store's data files that no entry's tree redirects to
// (a mark and sweep: the marks are the entries' refs files), and returns
// how many bytes it freed. It does nothing while a build holds the
// store (the build may redirect to a file no entry names yet), nor when
// a refs file cannot be read: a data file is removed only when it is
// certainly unused. Entries leased by mounts keep their refs files, so
// what a mount reads stays.
func (c *Cache) Sweep() (int64, error) {
	if _, err := os.Stat(c.storeRoot()); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	lock, ok, err := c.lockStore(true)
	if err != nil || !ok {
		return 0, err
	}
	defer lock.Close()
	ents, err := c.Entries()
	if err != nil {
		return 0, err
	}
	live := map[string]bool{}
	for _, e := range ents {
		refs, err := c.readRefs(e.Key)
		if err != nil {
			return 0, hostErr("layer cache", c.path(e.Key), err)
		}
		for _, r := range refs {
			live[r.name] = true
		}
	}
	dirs, err := os.ReadDir(c.storeRoot())
	if err != nil {
		return 0, hostErr("layer cache", c.storeRoot(), err)
	}
	var freed int64
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(c.storeRoot(), d.Name()))
		if err != nil {
			return freed, hostErr("layer cache", c.storeRoot(), err)
		}
		for _, f := range files {
			name := d.Name() + "/" + f.Name()
			if live[name] {
				continue
			}
			p := filepath.Join(c.storeRoot(), name)
			if fi, err := os.Lstat(p); err == nil {
				freed += fi.Size()
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return freed, hostErr("layer cache", p, err)
			}
		}
	}
	return freed, hostErr("layer cache", c.storeRoot(), ignoreMissing(os.Remove(filepath.Join(c.storeRoot(), "sweep"))))
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
