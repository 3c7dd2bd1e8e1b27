package vfs

import (
	"slices"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// Orphans. On a POSIX filesystem a file that loses its last name while a
// program has it open stays readable and writable until it is closed. The
// mount is where that happens, so a vault with SetKeepOrphans keeps such a
// regular file as an orphan: an inode with no links, listed under
//
//	"O" ino:8 ^layer:8        orphan: 0x01 (a staged write's, stage.go: 0x01 credit:8)
//
// with its data, counted in the usage like any file, until ReleaseOrphan
// drops it (the mount does when the kernel forgets the inode, and releases
// every orphan when it starts and stops, so a crash leaks nothing for
// long). Orphans have no path: diff, export and checkpoints' trees do not
// see them.

const prefixOrphan = 'O'

func orphanVKey(ino Ino) []byte { return u64([]byte{prefixOrphan}, uint64(ino)) }

// SetKeepOrphans makes regular files that lose their last name in this
// vault's later transactions orphans instead of dropping them. It must be
// set before the vault is shared between goroutines.
func (v *Vault) SetKeepOrphans(on bool) { v.keepOrphans = on }

// orphan keeps n, which just lost its last name, as an orphan.
func (t *Tx) orphan(n *inode) error {
	n.Nlink = 0
	n.Ctime = t.now
	if err := t.putInode(n); err != nil {
		return err
	}
	return t.put(orphanVKey(n.Ino), []byte{1})
}

// ReleaseOrphan drops orphan ino and its data. It reports false, changing
// nothing, when ino is not an orphan (it has a name again, or is gone).
func (t *Tx) ReleaseOrphan(ino Ino) (bool, error) {
	const op = "release"
	if err := t.writable(op); err != nil {
		return false, err
	}
	if _, _, ok, err := t.get(orphanVKey(ino)); err != nil || !ok {
		return false, err
	}
	if err := t.del(orphanVKey(ino)); err != nil {
		return false, err
	}
	n, err := t.inode(ino)
	if errs.Errno(err) == syscall.ENOENT {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return true, t.dropInode(n)
}

// Orphans lists the orphans of the state, in inode order.
func (t *Tx) Orphans() ([]Ino, error) {
	var out []Ino
	prefix := []byte{prefixOrphan}
	err := t.scanVisible(prefix, func(vkey, val []byte) {
		if len(val) > 0 && len(vkey) == 9 {
			out = append(out, Ino(u64From(vkey[1:])))
		}
	})
	slices.Sort(out)
	return out, err
}

// scanVisible calls fn with the version of every record under prefix
// visible in the state (whiteouts included, as an empty val), each record
// once.
func (t *Tx) scanVisible(prefix []byte, fn func(vkey, val []byte)) error {
	end := kv.PrefixEnd(prefix)
	decided := map[string]bool{}
	for i := range t.c.segs {
		layers := t.c.segs[i].layers
		err := t.txs[i].Scan(prefix, end, func(k, v []byte) (bool, error) {
			vkey, layer, ok := splitVersion(k)
			if !ok || !layers[layer] || decided[string(vkey)] {
				return true, nil
			}
			decided[string(vkey)] = true
			fn(vkey, v)
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
