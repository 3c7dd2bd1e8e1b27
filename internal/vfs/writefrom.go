package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// WriteStep is the most content one transaction of WriteFrom writes.
const WriteStep = 1 << 20

// WriteOptions say how WriteFrom writes.
type WriteOptions struct {
	// Append adds to the end of the file instead of replacing its content.
	Append bool
	// Mode is the permissions of a file WriteFrom creates.
	Mode uint32
	// MakeParents creates missing parent directories (0755), in the
	// transaction that puts the content in place: a refused write leaves
	// none behind.
	MakeParents bool
}

// Written is what WriteFrom did.
type Written struct {
	Size    int64 // the file's size after the write
	Written int64 // bytes written
	Created bool  // the file did not exist
}

// WriteFrom writes src to the file at clean (a CleanPath), all or nothing,
// for the CLI's write and the MCP server's file_write alike. Content that
// fits in one WriteStep is written in one transaction; longer content goes
// to a stage (Tx.Stage), one transaction per step, put in place by the
// last one, so memory stays bounded and a write refused half-way (a quota,
// a failed read of src, ctx cancelled) is aborted and changes nothing.
// A read error of src is an IoError; a directory at clean is NotAFile.
func (v *Vault) WriteFrom(ctx context.Context, clean string, src io.Reader, o WriteOptions) (Written, error) {
	var r Written
	buf := make([]byte, WriteStep)
	n, rerr := readStep(ctx, src, buf, clean)
	if rerr != nil && rerr != io.EOF {
		return r, rerr
	}
	if rerr == io.EOF {
		err := v.Update(func(tx *Tx) error {
			if err := o.makeParents(tx, clean); err != nil {
				return err
			}
			at, created, err := openForWrite(tx, clean, o.Mode)
			if err != nil {
				return err
			}
			r.Created = created
			off := at.Size
			if !o.Append {
				off = 0
				if at.Size > 0 {
					if _, err := tx.SetAttr(at.Ino, SetAttr{Size: &off}); err != nil {
						return err
					}
				}
			}
			if _, err := tx.Write(at.Ino, int64(off), buf[:n]); err != nil {
				return err
			}
			r.Size, r.Written = int64(off)+int64(n), int64(n)
			return nil
		})
		return r, err
	}
	stage, err := v.beginStage(clean, o)
	if err != nil {
		return r, err
	}
	for {
		last := rerr == io.EOF
		err := ctx.Err()
		if err == nil {
			err = v.Update(func(tx *Tx) error {
				at, err := tx.GetAttr(stage)
				if err != nil {
					return err
				}
				if _, err := tx.Write(stage, int64(at.Size), buf[:n]); err != nil {
					return err
				}
				r.Size = int64(at.Size) + int64(n)
				if !last {
					return nil
				}
				if err := o.makeParents(tx, clean); err != nil {
					return err
				}
				r.Created, err = placeStage(tx, stage, clean, o.Mode)
				return err
			})
		}
		if err == nil {
			r.Written += int64(n)
			if last {
				return r, nil
			}
			if n, rerr = readStep(ctx, src, buf, clean); rerr != io.EOF {
				err = rerr
			}
		}
		if err != nil {
			if aerr := v.Update(func(tx *Tx) error { return tx.AbortStage(stage) }); aerr != nil {
				return Written{}, errors.Join(err, aerr)
			}
			return Written{}, err
		}
	}
}

func (o WriteOptions) makeParents(tx *Tx, clean string) error {
	if !o.MakeParents {
		return nil
	}
	dir, _ := SplitPath(clean)
	_, err := tx.MkdirAll(dir, 0o755)
	return err
}

// readStep fills buf from src; io.EOF when src ended within it.
func readStep(ctx context.Context, src io.Reader, buf []byte, clean string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(src, buf)
	switch err {
	case nil:
		return n, nil
	case io.EOF, io.ErrUnexpectedEOF:
		return n, io.EOF
	}
	return n, &errs.Error{Kind: errs.IoError, Op: "write", Path: clean, Err: fmt.Errorf("reading input: %w", err)}
}

// openForWrite returns the file at p, created when missing; a symlink at
// p is followed.
func openForWrite(tx *Tx, p string, mode uint32) (at Attr, created bool, err error) {
	dir, name, err := tx.ResolveParent(p)
	if err != nil {
		return at, false, err
	}
	at, err = tx.Lookup(dir, name)
	switch {
	case errs.Is(err, errs.NotFound):
		at, err = tx.Create(dir, name, mode, 0, 0)
		created = true
	case err == nil && at.Type == TypeSymlink:
		at, err = tx.Resolve(p, true)
	}
	if err == nil && at.Type != TypeFile {
		err = notAFile(p, at.Type)
	}
	return at, created, err
}

func notAFile(p string, t FileType) error {
	return &errs.Error{Kind: errs.NotAFile, Op: "write", Path: p, Errno: syscall.EISDIR,
		Err: fmt.Errorf("not a regular file (%s)", t)}
}

// beginStage makes the stage of a write to the file at clean, after the
// checks openForWrite makes: its directory exists (unless MakeParents will
// make it), it is no directory.
func (v *Vault) beginStage(clean string, o WriteOptions) (stage Ino, err error) {
	err = v.Update(func(tx *Tx) error {
		var target Ino
		at, err := tx.Resolve(clean, true)
		switch {
		case err == nil && at.Type != TypeFile:
			return notAFile(clean, at.Type)
		case err == nil:
			target = at.Ino
		case !errs.Is(err, errs.NotFound):
			return err
		case !o.MakeParents:
			if _, _, err := tx.ResolveParent(clean); err != nil {
				return err
			}
		}
		stage, err = tx.Stage(target, o.Append)
		return err
	})
	return stage, err
}

// placeStage puts a finished stage in place at clean: as the new file when
// there is none, else as the content of the file there (a symlink
// followed, as openForWrite does).
func placeStage(tx *Tx, stage Ino, clean string, mode uint32) (created bool, err error) {
	dir, name, err := tx.ResolveParent(clean)
	if err != nil {
		return false, err
	}
	if _, err := tx.Lookup(dir, name); errs.Is(err, errs.NotFound) {
		_, err := tx.PlaceStage(stage, dir, name, mode)
		return err == nil, err
	}
	at, created, err := openForWrite(tx, clean, mode)
	if err != nil {
		return false, err
	}
	_, err = tx.CommitStage(stage, at.Ino)
	return created, err
}
