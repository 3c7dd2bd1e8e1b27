//go:build linux

package overlay

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A stack deeper than MaxDepth is made shallow again before it is
// mounted: each lookup of a name that only the base holds passes every
// delta, and each lower costs the mount. Squashing the whole state from
// the vault writes all of it again (5,050 files 367 ms, 100,000 files
// 8–13 s, every MaxDepth+1 runs); mergeDeltas instead makes the deltas
// one delta over the same base, by hard links, at a cost of the names the
// runs wrote. Entries never change once complete, so a link is as good as
// a copy.

// mergeDeltas replaces entry key, the top of a complete stack deeper than
// MaxDepth, with one delta over the stack's base that shows the same
// state. It does nothing and reports false when the stack is not whole,
// or when its deltas hold more names than its base: a squash from the
// vault then makes the smaller tree.
func (c *Cache) mergeDeltas(key string) (MatStats, bool, error) {
	var st MatStats
	var lease Lease
	defer lease.Release()
	keys, metas, ok := c.chain(key, 0, &lease)
	if !ok || len(keys) < 3 {
		return st, false, nil
	}
	n := len(keys) - 1 // the deltas; keys[n] is the base
	names := 0
	for _, m := range metas[:n] {
		names += m.Files
	}
	if names > metas[n].Files {
		return st, false, nil
	}
	trees := make([]string, n)
	for i, k := range keys[:n] {
		trees[i] = c.Tree(k)
	}
	tmp, err := c.tmpDir()
	if err != nil {
		return st, false, err
	}
	defer removeAll(tmp)
	m := &merger{f: c.Format}
	tree := filepath.Join(tmp, "tree")
	if err := m.mergeDir(tree, trees, false); err != nil {
		// A file linked from too many entries, or one another user's
		// (fs.protected_hardlinks): the squash from the vault copies.
		if errors.Is(err, unix.EMLINK) || errors.Is(err, unix.EPERM) {
			return st, false, nil
		}
		return st, false, hostErr("layer cache", tree, err)
	}
	meta := entryMeta{Parent: keys[n], Format: c.Format, Layout: layoutOf(c.Layout), Files: m.st.Files, Bytes: m.st.Bytes, Created: time.Now().UTC()}
	if err := c.seal(tmp, meta, false); err != nil {
		return st, false, err
	}
	// The lease's shared locks would keep Drop from taking the old top;
	// the merged tree's links keep its files.
	lease.Release()
	if err := c.Drop(key); err != nil {
		return st, false, err
	}
	if err := c.place(tmp, key); err != nil {
		return st, false, err
	}
	m.st.Bytes = 0 // linked, not written
	return m.st, true, nil
}

// merger merges the trees of a stack's deltas.
type merger struct {
	f  Format
	st MatStats // Files: names made or linked; Bytes: the files' sizes
}

// mergeDir makes dir dst show what srcs show (the same dir in each
// delta, newest first, each one's names hiding the same names below),
// with the attributes of srcs[0]. opaque: the dir is cut off from the
// base (a delta below srcs made it opaque, or held a file or whiteout at
// its name), and is marked so.
func (m *merger) mergeDir(dst string, srcs []string, opaque bool) error {
	var top unix.Stat_t
	if err := unix.Lstat(srcs[0], &top); err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	m.st.Files++
	done := map[string]bool{}
	xattrWhiteouts := false
	for i, src := range srcs {
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		// An empty file marked overlay.whiteout is one only in a dir
		// marked opaque "x" (no kernel upper holds one; kept exact).
		srcX := m.marked(src, "opaque") == "x"
		for _, e := range ents {
			name := e.Name()
			if done[name] {
				continue
			}
			done[name] = true
			p := filepath.Join(src, name)
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return err
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				// Files, symlinks, whiteouts: the newest is the name.
				if err := unix.Linkat(unix.AT_FDCWD, p, unix.AT_FDCWD, filepath.Join(dst, name), 0); err != nil {
					return err
				}
				m.st.Files++
				if st.Mode&unix.S_IFMT == unix.S_IFREG {
					m.st.Bytes += st.Size
					if srcX && st.Size == 0 && m.marked(p, "whiteout") != "" {
						xattrWhiteouts = true
					}
				}
				continue
			}
			// A dir shows the same name's dirs below it, down to the
			// first that is opaque or a delta that holds a non-dir there.
			below := []string{p}
			cut := m.marked(p, "opaque") == "y"
			for _, lower := range srcs[i+1:] {
				if cut {
					break
				}
				q := filepath.Join(lower, name)
				var qs unix.Stat_t
				err := unix.Lstat(q, &qs)
				switch {
				case errors.Is(err, unix.ENOENT):
					continue // that delta did not touch it
				case err != nil:
					return err
				case qs.Mode&unix.S_IFMT != unix.S_IFDIR:
					cut = true
					continue
				}
				below = append(below, q)
				cut = m.marked(q, "opaque") == "y"
			}
			// Cut or not, what the dir above hides stays hidden: only a
			// cut of its own makes this one opaque.
			if err := m.mergeDir(filepath.Join(dst, name), below, cut); err != nil {
				return err
			}
		}
	}
	switch {
	case opaque:
		if err := unix.Lsetxattr(dst, m.f.prefix()+"opaque", []byte("y"), 0); err != nil {
			return err
		}
	case xattrWhiteouts: // the form the kernel honours only in a dir so marked
		if err := unix.Lsetxattr(dst, m.f.prefix()+"opaque", []byte("x"), 0); err != nil {
			return err
		}
	}
	return m.attrs(srcs[0], dst, &top)
}

// marked is the value of overlay marker name on p, or "".
func (m *merger) marked(p, name string) string {
	v, err := getXattr(p, m.f.prefix()+name)
	if err != nil {
		return ""
	}
	return string(v)
}

// attrs gives dir d the xattrs (the overlay's markers left to mergeDir),
// owner, mode and times of s.
func (m *merger) attrs(s, d string, st *unix.Stat_t) error {
	names, err := listXattrs(s)
	if err != nil {
		return err
	}
	for _, n := range names {
		if isOverlayXattr(n) {
			continue
		}
		val, err := getXattr(s, n)
		if err != nil {
			return err
		}
		if err := unix.Lsetxattr(d, n, val, 0); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 { // only root gives a host dir another owner (as materialize)
		if err := unix.Lchown(d, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if err := unix.Chmod(d, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, d, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}
