package vfs

import (
	"slices"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// Extended attribute flags, with Linux's values for setxattr.
const (
	XattrCreate  = 1 // fail with EEXIST if the attribute exists
	XattrReplace = 2 // fail with ENODATA if it does not
)

// XattrValueMax is the largest attribute value, as on Linux.
const XattrValueMax = 64 << 10

func checkXattrName(op, name string) error {
	switch {
	case name == "":
		return errs.E(op, name, syscall.EINVAL)
	case len(name) > NameMax:
		return errs.E(op, name, syscall.ERANGE)
	case slices.Contains([]byte(name), 0):
		return errs.E(op, name, syscall.EINVAL)
	}
	return nil
}

// GetXattr returns the value of attribute name; ENODATA when unset.
func (t *Tx) GetXattr(ino Ino, name string) ([]byte, error) {
	if err := checkXattrName("getxattr", name); err != nil {
		return nil, err
	}
	if _, err := t.inode(ino); err != nil {
		return nil, err
	}
	b, _, ok, err := t.get(xattrVKey(ino, name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errs.E("getxattr", name, syscall.ENODATA)
	}
	return b[1:], nil // values carry a leading 0x01 so that empty ones are not whiteouts
}

// xattrBytes is what one attribute counts against max_size_mb: its name
// and its value, so that attributes cannot fill a vault unseen; nothing in
// a vault made before they counted (featureXattrUsage).
func (t *Tx) xattrBytes(name string, value []byte) int64 {
	if !t.v.countsXattrs() {
		return 0
	}
	return int64(len(name) + len(value))
}

// XattrGrowth returns how much setting attribute name of ino to value
// would grow the usage (negative: shrink it), as SetXattr charges it.
func (t *Tx) XattrGrowth(ino Ino, name string, value []byte) (int64, error) {
	old, _, exists, err := t.get(xattrVKey(ino, name))
	if err != nil {
		return 0, err
	}
	delta := t.xattrBytes(name, value)
	if exists {
		delta -= t.xattrBytes(name, old[1:])
	}
	return delta, nil
}

// countsXattrs tells whether the usage counters count extended attributes.
func (v *Vault) countsXattrs() bool { return slices.Contains(v.hdr.Features, featureXattrUsage) }

// SetXattr sets attribute name to value. Growth past max_size_mb is
// QuotaExceeded (ENOSPC) and changes nothing.
func (t *Tx) SetXattr(ino Ino, name string, value []byte, flags uint32) error {
	const op = "setxattr"
	if err := t.writable(op); err != nil {
		return err
	}
	if err := checkXattrName(op, name); err != nil {
		return err
	}
	if len(value) > XattrValueMax {
		return errs.E(op, name, syscall.E2BIG)
	}
	n, err := t.inode(ino)
	if err != nil {
		return err
	}
	old, _, exists, err := t.get(xattrVKey(ino, name))
	if err != nil {
		return err
	}
	if flags&XattrCreate != 0 && exists {
		return errs.E(op, name, syscall.EEXIST)
	}
	if flags&XattrReplace != 0 && !exists {
		return errs.E(op, name, syscall.ENODATA)
	}
	delta := t.xattrBytes(name, value)
	if exists {
		delta -= t.xattrBytes(name, old[1:])
	}
	if err := t.charge(op, name, delta, 0); err != nil {
		return err
	}
	if err := t.put(xattrVKey(ino, name), append([]byte{1}, value...)); err != nil {
		return err
	}
	n.Ctime = t.now
	return t.putInode(n)
}

// RemoveXattr deletes attribute name; ENODATA when unset.
func (t *Tx) RemoveXattr(ino Ino, name string) error {
	const op = "removexattr"
	if err := t.writable(op); err != nil {
		return err
	}
	if err := checkXattrName(op, name); err != nil {
		return err
	}
	n, err := t.inode(ino)
	if err != nil {
		return err
	}
	old, _, ok, err := t.get(xattrVKey(ino, name))
	if err != nil {
		return err
	} else if !ok {
		return errs.E(op, name, syscall.ENODATA)
	}
	if err := t.del(xattrVKey(ino, name)); err != nil {
		return err
	}
	if err := t.charge(op, name, -t.xattrBytes(name, old[1:]), 0); err != nil {
		return err
	}
	n.Ctime = t.now
	return t.putInode(n)
}

// xattrUsage sums what the attributes of ino count against the quota.
func (t *Tx) xattrUsage(ino Ino) (int64, error) {
	var sum int64
	if !t.v.countsXattrs() {
		return 0, nil
	}
	err := t.scanVisible(xattrInoPrefix(ino), func(vkey, val []byte) {
		if len(val) > 0 {
			sum += int64(len(vkeyName(vkey)) + len(val) - 1)
		}
	})
	return sum, err
}

// ListXattr returns the names of an inode's attributes, sorted.
func (t *Tx) ListXattr(ino Ino) ([]string, error) {
	if _, err := t.inode(ino); err != nil {
		return nil, err
	}
	prefix := xattrInoPrefix(ino)
	decided := map[string]bool{}
	var names []string
	for i := range t.c.segs {
		layers := t.c.segs[i].layers
		err := t.txs[i].Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
			vkey, layer, ok := splitVersion(k)
			if !ok || !layers[layer] {
				return true, nil
			}
			name := vkeyName(vkey)
			if decided[name] {
				return true, nil
			}
			decided[name] = true
			if len(v) > 0 {
				names = append(names, name)
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	return names, nil
}
