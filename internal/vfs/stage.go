package vfs

import (
	"encoding/binary"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Staged writes. A write too large for one transaction (the CLI streams
// standard input and imported files in 1 MiB steps) goes to a stage: an
// orphan (orphan.go) written with Write across transactions, then put in
// place by one last transaction, CommitStage or PlaceStage. A write
// refused half-way (a quota, a failed read of its source) drops the stage
// with AbortStage and leaves the file as it was, or absent.
//
// A stage replacing a file counts in the usage beside it until it is in
// place, but what the file will give back then is a credit, not held
// against the limits: replacing a 3 MiB file by 3 MiB in a 4 MiB vault
// works, as it does in one transaction. The credit is kept in the stage's
// orphan record:
//
//	"O" ino:8 ^layer:8        0x01 credit:8 (bytes the target holds when staging starts)
//
// A stage left by a crash is an orphan like any other: a mount releases it
// when it starts or stops.

// Stage starts a staged write of file target's new content and returns the
// stage. With appendTo the stage starts as target's content (its chunks
// shared, O(chunks)), otherwise empty. Target 0 stages a new file, which
// PlaceStage names.
func (t *Tx) Stage(target Ino, appendTo bool) (Ino, error) {
	const op = "write"
	if err := t.writable(op); err != nil {
		return 0, err
	}
	var d *inode
	var c credit
	if target != 0 {
		var err error
		if d, err = t.fileInode(op, target); err != nil {
			return 0, err
		}
		c = credit{bytes: int64(d.Size), files: 1}
	}
	if err := t.chargeCredit(op, "", 0, 1, c); err != nil {
		return 0, err
	}
	id, err := t.nextIno()
	if err != nil {
		return 0, err
	}
	n := &inode{Attr: Attr{Ino: Ino(id), Type: TypeFile, Mode: 0o600, Atime: t.now, Mtime: t.now, Ctime: t.now},
		birth: birthOf(t.v.hdr.VaultID)}
	t.created(n.Ino, false)
	if appendTo && d != nil && d.Size > 0 {
		if err := t.chargeCredit(op, "", int64(d.Size), 0, c); err != nil {
			return 0, err
		}
		for i := uint64(0); i*ChunkSize < d.Size; i++ {
			if _, err := t.shareChunk(d, i, n, i); err != nil {
				return 0, err
			}
		}
		n.Size = d.Size
	}
	if err := t.putInode(n); err != nil {
		return 0, err
	}
	return n.Ino, t.put(orphanVKey(n.Ino), binary.BigEndian.AppendUint64([]byte{1}, uint64(c.bytes)))
}

// stageCredit returns the credit of n when it is a stage.
func (t *Tx) stageCredit(n *inode) (credit, error) {
	if n.Nlink != 0 {
		return credit{}, nil
	}
	val, _, ok, err := t.get(orphanVKey(n.Ino))
	if err != nil || !ok || len(val) != 9 {
		return credit{}, err
	}
	return credit{bytes: int64(binary.BigEndian.Uint64(val[1:]))}, nil
}

// stage loads stage ino; EINVAL when it is not one.
func (t *Tx) stage(op string, ino Ino) (*inode, error) {
	n, err := t.fileInode(op, ino)
	if err != nil {
		return nil, err
	}
	val, _, ok, err := t.get(orphanVKey(ino))
	if err != nil {
		return nil, err
	}
	if n.Nlink != 0 || !ok || len(val) != 9 {
		return nil, errs.E(op, "", syscall.EINVAL)
	}
	return n, nil
}

// CommitStage makes file target hold exactly the stage's content and drops
// the stage. Target keeps its inode: its names, mode, owner and xattrs.
// The chunks are shared, not copied: O(chunks). The quotas are checked
// once more against what the vault then holds; on error nothing changed
// and the stage is still there to drop.
func (t *Tx) CommitStage(stage, target Ino) (Attr, error) {
	const op = "write"
	if err := t.writable(op); err != nil {
		return Attr{}, err
	}
	s, err := t.stage(op, stage)
	if err != nil {
		return Attr{}, err
	}
	if target == stage {
		return Attr{}, errs.E(op, "", syscall.EINVAL)
	}
	d, err := t.fileInode(op, target)
	if err != nil {
		return Attr{}, err
	}
	if err := t.truncate(d, 0); err != nil {
		return Attr{}, err
	}
	if err := t.checkFileSize(op, "", s.Size); err != nil {
		return Attr{}, err
	}
	for i := uint64(0); i*ChunkSize < s.Size; i++ {
		if _, err := t.shareChunk(s, i, d, i); err != nil {
			return Attr{}, err
		}
	}
	if err := t.dropStage(s); err != nil {
		return Attr{}, err
	}
	if err := t.charge(op, "", int64(s.Size), 0); err != nil {
		return Attr{}, err
	}
	d.Size = s.Size
	d.Mtime, d.Ctime = t.now, t.now
	return d.Attr, t.putInode(d)
}

// PlaceStage names the stage dir/name, a new file of mode, and so ends the
// staging in O(1). The name must be free (EEXIST): a caller replacing a
// file removes it first, in the same transaction.
func (t *Tx) PlaceStage(stage, dir Ino, name string, mode uint32) (Attr, error) {
	const op = "create"
	if err := t.writable(op); err != nil {
		return Attr{}, err
	}
	if err := checkName(op, name); err != nil {
		return Attr{}, err
	}
	s, err := t.stage(op, stage)
	if err != nil {
		return Attr{}, err
	}
	parent, err := t.dirInode(op, dir)
	if err != nil {
		return Attr{}, err
	}
	if _, _, ok, err := t.entry(dir, name); err != nil {
		return Attr{}, err
	} else if ok {
		return Attr{}, errs.E(op, name, syscall.EEXIST)
	}
	if err := t.del(orphanVKey(stage)); err != nil {
		return Attr{}, err
	}
	s.Nlink = 1
	s.links = []link{{Parent: dir, Name: name}}
	s.Mode = mode & 0o7777
	s.Ctime = t.now
	if err := t.putInode(s); err != nil {
		return Attr{}, err
	}
	if err := t.put(dentryVKey(dir, name), encodeDentry(s.Ino, s.Type)); err != nil {
		return Attr{}, err
	}
	parent.Mtime, parent.Ctime = t.now, t.now
	return s.Attr, t.putInode(parent)
}

// AbortStage drops a stage and its data. A stage already gone (a mount
// released it) is not an error.
func (t *Tx) AbortStage(stage Ino) error {
	_, err := t.ReleaseOrphan(stage)
	return err
}

func (t *Tx) dropStage(s *inode) error {
	if err := t.del(orphanVKey(s.Ino)); err != nil {
		return err
	}
	return t.dropInode(s)
}
