package vfs

import (
	"errors"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Rename flags, with Linux's values for renameat2.
const (
	RenameNoReplace = 1 << 0 // fail with EEXIST if the target exists
	RenameExchange  = 1 << 1 // swap source and target atomically
)

// Rename moves odir/oname to ndir/nname. Without flags an existing target
// is replaced (a directory only by an empty directory). A directory cannot
// move into itself or below itself (EINVAL).
func (t *Tx) Rename(odir Ino, oname string, ndir Ino, nname string, flags uint32) error {
	const op = "rename"
	if err := t.writable(op); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return errs.E(op, oname, syscall.EINVAL)
	}
	if err := checkName(op, oname); err != nil {
		return err
	}
	if err := checkName(op, nname); err != nil {
		return err
	}
	op1, err := t.dirInode(op, odir)
	if err != nil {
		return err
	}
	np := op1
	if ndir != odir {
		if np, err = t.dirInode(op, ndir); err != nil {
			return err
		}
	}
	sino, styp, ok, err := t.entry(odir, oname)
	if err != nil {
		return err
	}
	if !ok {
		return errs.E(op, oname, syscall.ENOENT)
	}
	tino, ttyp, exists, err := t.entry(ndir, nname)
	if err != nil {
		return err
	}
	if flags&RenameExchange != 0 && !exists {
		return errs.E(op, nname, syscall.ENOENT)
	}
	if flags&RenameNoReplace != 0 && exists {
		return errs.E(op, nname, syscall.EEXIST)
	}
	if exists && tino == sino {
		return nil // two names of one inode: POSIX says do nothing
	}
	if styp == TypeDir {
		if err := t.checkNotBelow(op, sino, ndir); err != nil {
			return err
		}
	}
	src, err := t.inode(sino)
	if err != nil {
		return err
	}
	if flags&RenameExchange != 0 {
		if ttyp == TypeDir {
			if err := t.checkNotBelow(op, tino, odir); err != nil {
				return err
			}
		}
		dst, err := t.inode(tino)
		if err != nil {
			return err
		}
		return t.exchange(op1, oname, src, np, nname, dst)
	}
	if exists {
		switch {
		case styp == TypeDir && ttyp != TypeDir:
			return errs.E(op, nname, syscall.ENOTDIR)
		case styp != TypeDir && ttyp == TypeDir:
			return errs.E(op, nname, syscall.EISDIR)
		}
		dst, err := t.inode(tino)
		if err != nil {
			return err
		}
		if ttyp == TypeDir {
			if empty, err := t.isEmpty(tino); err != nil {
				return err
			} else if !empty {
				return errs.E(op, nname, syscall.ENOTEMPTY)
			}
		}
		if err := t.unlinkEntry(np, nname, dst); err != nil {
			return err
		}
	}
	if err := t.del(dentryVKey(odir, oname)); err != nil {
		return err
	}
	if err := t.put(dentryVKey(ndir, nname), encodeDentry(sino, styp)); err != nil {
		return err
	}
	src.removeLink(odir, oname)
	src.links = append(src.links, link{Parent: ndir, Name: nname})
	src.Ctime = t.now
	if styp == TypeDir && odir != ndir {
		op1.Nlink--
		np.Nlink++
	}
	op1.Mtime, op1.Ctime = t.now, t.now
	np.Mtime, np.Ctime = t.now, t.now
	return t.putAll(src, op1, np)
}

// exchange swaps two names atomically (RENAME_EXCHANGE).
func (t *Tx) exchange(op1 *inode, oname string, src *inode, np *inode, nname string, dst *inode) error {
	if err := t.put(dentryVKey(op1.Ino, oname), encodeDentry(dst.Ino, dst.Type)); err != nil {
		return err
	}
	if err := t.put(dentryVKey(np.Ino, nname), encodeDentry(src.Ino, src.Type)); err != nil {
		return err
	}
	src.removeLink(op1.Ino, oname)
	src.links = append(src.links, link{Parent: np.Ino, Name: nname})
	dst.removeLink(np.Ino, nname)
	dst.links = append(dst.links, link{Parent: op1.Ino, Name: oname})
	src.Ctime, dst.Ctime = t.now, t.now
	if op1.Ino != np.Ino {
		if src.Type == TypeDir {
			op1.Nlink--
			np.Nlink++
		}
		if dst.Type == TypeDir {
			np.Nlink--
			op1.Nlink++
		}
	}
	op1.Mtime, op1.Ctime = t.now, t.now
	np.Mtime, np.Ctime = t.now, t.now
	return t.putAll(src, dst, op1, np)
}

// putAll stores inodes, once each even when the same one appears twice.
func (t *Tx) putAll(ns ...*inode) error {
	seen := map[Ino]bool{}
	for _, n := range ns {
		if seen[n.Ino] {
			continue
		}
		seen[n.Ino] = true
		if err := t.putInode(n); err != nil {
			return err
		}
	}
	return nil
}

// checkNotBelow fails with EINVAL when dir is ino itself or lies below it.
func (t *Tx) checkNotBelow(op string, ino, dir Ino) error {
	for d := dir; d != RootIno; {
		if d == ino {
			return &errs.Error{Kind: errs.InvalidPath, Op: op, Errno: syscall.EINVAL,
				Err: errors.New("cannot move a directory into itself")}
		}
		n, err := t.inode(d)
		if err != nil {
			return err
		}
		if len(n.links) == 0 {
			return corruptf("directory %d has no parent", d)
		}
		d = n.links[0].Parent
	}
	if ino == RootIno {
		return errs.E(op, "", syscall.EINVAL)
	}
	return nil
}
