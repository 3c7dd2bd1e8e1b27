// Package apply writes the changes between two states of vaults into a
// host directory, without following a host symlink or writing outside it:
// the model of `avfs apply`, shared by the command line and the library.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Entry is one path apply wrote (or, on a dry run, would write).
type Entry struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // added, modified, deleted, mode_changed, type_changed
}

// Note is one path apply left alone, and why.
type Note struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Result is what apply did (docs/schema/apply.json).
type Result struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	HostDir   string  `json:"host_dir"`
	DryRun    bool    `json:"dry_run"`
	Applied   []Entry `json:"applied"`
	Conflicts []Note  `json:"conflicts"`
	Skipped   []Note  `json:"skipped"`
}

// Options are apply's settings.
type Options struct {
	DryRun bool // report what would be written and what conflicts; write nothing
	Force  bool // overwrite host files that no longer hold what from held
}

// Origin is the REF of the recorded origin of the vault r selects (the
// host state it was imported from), or of its parent's when it is a fork
// without one: what a host directory holds before apply. A vault without
// one is NotFound.
func Origin(r *refs.Resolver) (string, error) {
	cur, err := r.Resolve(refs.Working)
	if err != nil {
		return "", err
	}
	v := cur.Vault
	for range 64 {
		o, err := v.Origin()
		if err != nil {
			return "", err
		}
		if o != nil {
			return "vault:" + v.Name() + "@" + o.Checkpoint, nil
		}
		parent, _, ok, err := v.Base()
		if err != nil || !ok {
			break
		}
		p, err := r.Resolve("vault:" + parent)
		if err != nil {
			return "", err
		}
		v = p.Vault
	}
	return "", &errs.Error{Kind: errs.NotFound, Op: "apply", Vault: cur.Vault.Name(),
		Err:  fmt.Errorf("vault %q has no recorded origin", cur.Vault.Name()),
		Hint: "name the state HOST_DIR holds with --from, or create the vault with `avfs vault create NAME --from HOST_DIR`"}
}

// hostNode is what the host holds at a path, read without following a
// symlink.
type hostNode struct {
	exists  bool
	typ     vfs.FileType
	mode    uint32
	content []byte
	through bool // a parent component is not a directory (or is a symlink)
}

// Apply writes the changes between states from and to into host
// directory hostDir: a host file that no longer holds what from held is a
// conflict, reported and left alone unless opts.Force; files already as
// to are skipped; modes are kept (not setuid or setgid); nothing is
// written outside hostDir (no host symlink is followed; files are created
// with O_NOFOLLOW). With opts.DryRun nothing is written. A ctx that ends
// stops it between paths (Interrupted).
func Apply(ctx context.Context, hostDir string, from, to refs.State, opts Options) (*Result, error) {
	dry, force := opts.DryRun, opts.Force
	abs, err := filepath.Abs(hostDir)
	if err != nil {
		return nil, hostErr("apply", hostDir, err)
	}
	root, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, hostErr("apply", abs, err)
	}
	defer unix.Close(root)
	changes, err := vfs.Diff(from.StateRef, to.StateRef)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(changes))
	for i, c := range changes {
		paths[i] = c.Path
	}
	before, err := vfs.Snapshots(from.StateRef, paths)
	if err != nil {
		return nil, err
	}
	after, err := vfs.Snapshots(to.StateRef, paths)
	if err != nil {
		return nil, err
	}
	res := &Result{From: from.Name, To: to.Name, HostDir: abs, DryRun: dry,
		Applied: []Entry{}, Conflicts: []Note{}, Skipped: []Note{}}
	ap := &applier{root: root, host: abs}
	type todo struct {
		i    int
		kind string
	}
	var plan []todo
	for i, p := range paths {
		if ctx.Err() != nil {
			return nil, errs.Stopped(ctx, "apply")
		}
		b, t := before[i], after[i]
		if t.Exists && !hostKind(t.Type) || b.Exists && !hostKind(b.Type) && !t.Exists {
			res.Skipped = append(res.Skipped, Note{p, t.Type.String() + " files are not applied"})
			continue
		}
		h := ap.stat(p)
		switch {
		case h.through:
			res.Conflicts = append(res.Conflicts, Note{p, "a parent on the host is not a directory (a symlink is never followed)"})
			continue
		case h.matches(t, true):
			res.Skipped = append(res.Skipped, Note{p, "the host already holds it"})
			continue
		case !h.matches(b, false) && !force:
			res.Conflicts = append(res.Conflicts, Note{p, "the host file changed since " + from.Name})
			continue
		}
		plan = append(plan, todo{i, string(changes[i].Kind)})
	}
	for _, s := range plan {
		res.Applied = append(res.Applied, Entry{paths[s.i], s.kind})
	}
	if dry {
		return res, nil
	}
	// Removals deepest first, then creations parents first.
	for k := len(plan) - 1; k >= 0; k-- {
		i := plan[k].i
		if t := after[i]; t.Exists && t.Type == vfs.TypeDir && ap.stat(paths[i]).typ == vfs.TypeDir {
			continue // a directory stays and gets its mode below
		}
		kept, err := ap.remove(paths[i])
		if err != nil {
			return nil, err
		}
		if kept {
			res.Conflicts = append(res.Conflicts, Note{paths[i], "the host directory holds files the vault does not"})
		}
	}
	for _, s := range plan {
		if t := after[s.i]; t.Exists {
			if err := ap.put(paths[s.i], t); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

func hostKind(t vfs.FileType) bool {
	return t == vfs.TypeFile || t == vfs.TypeDir || t == vfs.TypeSymlink
}

// matches reports whether the host holds s; permission bits (as apply
// writes them: no setuid or setgid) count only when withMode.
func (h hostNode) matches(s vfs.Snapshot, withMode bool) bool {
	if !s.Exists || !h.exists {
		return s.Exists == h.exists
	}
	if h.typ != s.Type {
		return false
	}
	if withMode && s.Type != vfs.TypeSymlink && h.mode != s.Mode&^0o6000 {
		return false
	}
	return s.Type == vfs.TypeDir || bytes.Equal(h.content, s.Content)
}

// applier writes below one host directory, reaching every directory with
// openat and O_NOFOLLOW from the root's descriptor.
type applier struct {
	root int
	host string
}

// parent opens the directory holding rel path p ("/a/b" → "a"), making
// missing directories when mk; ok is false when a component is not a
// directory.
func (ap *applier) parent(p string, mk bool) (fd int, name string, ok bool, err error) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	fd = ap.root
	for _, c := range parts[:len(parts)-1] {
		if mk {
			if err := unix.Mkdirat(fd, c, 0o755); err != nil && err != unix.EEXIST {
				ap.close(fd)
				return -1, "", false, ap.hostErr(p, err)
			}
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		ap.close(fd)
		if err != nil {
			if err == unix.ENOENT && !mk {
				return -1, "", true, nil
			}
			if err == unix.ELOOP || err == unix.ENOTDIR || err == unix.ENOENT {
				return -1, "", false, nil
			}
			return -1, "", false, ap.hostErr(p, err)
		}
		fd = next
	}
	return fd, parts[len(parts)-1], true, nil
}

func (ap *applier) close(fd int) {
	if fd != ap.root && fd >= 0 {
		unix.Close(fd)
	}
}

func (ap *applier) hostErr(p string, err error) error {
	return errs.Host("apply", filepath.Join(ap.host, filepath.FromSlash(p)), err)
}

// stat reads what the host holds at p.
func (ap *applier) stat(p string) hostNode {
	fd, name, ok, err := ap.parent(p, false)
	if err != nil || !ok {
		return hostNode{through: !ok}
	}
	if fd < 0 {
		return hostNode{} // a parent is missing: so is p
	}
	defer ap.close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return hostNode{}
	}
	h := hostNode{exists: true, mode: uint32(st.Mode) & 0o7777} // uint16 on darwin
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		h.typ = vfs.TypeDir
	case unix.S_IFLNK:
		h.typ = vfs.TypeSymlink
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(fd, name, buf)
		if err == nil {
			h.content = buf[:n]
		}
	case unix.S_IFREG:
		h.typ = vfs.TypeFile
		f, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			file := os.NewFile(uintptr(f), name)
			h.content, _ = io.ReadAll(file)
			file.Close()
		}
	default:
		h.typ = vfs.TypeFifo // something apply never writes over without --force
	}
	return h
}

// remove removes what the host holds at p, a directory only when empty:
// kept says it was not.
func (ap *applier) remove(p string) (kept bool, err error) {
	fd, name, ok, err := ap.parent(p, false)
	if err != nil || !ok || fd < 0 {
		return false, err
	}
	defer ap.close(fd)
	err = unix.Unlinkat(fd, name, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		err = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
	}
	switch err {
	case unix.ENOENT:
		return false, nil
	case unix.ENOTEMPTY, unix.EEXIST:
		return true, nil
	}
	return false, ap.hostErr(p, err)
}

// put makes p hold s.
func (ap *applier) put(p string, s vfs.Snapshot) error {
	fd, name, ok, err := ap.parent(p, true)
	if err != nil {
		return err
	}
	if !ok {
		return ap.hostErr(p, errors.New("a parent is not a directory"))
	}
	defer ap.close(fd)
	mode := s.Mode &^ 0o6000
	switch s.Type {
	case vfs.TypeDir:
		if err := unix.Mkdirat(fd, name, mode); err != nil && err != unix.EEXIST {
			return ap.hostErr(p, err)
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return ap.hostErr(p, err)
		}
		defer unix.Close(sub)
		return ap.hostErr(p, unix.Fchmod(sub, mode))
	case vfs.TypeSymlink:
		return ap.hostErr(p, unix.Symlinkat(string(s.Content), fd, name))
	}
	out, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return ap.hostErr(p, err)
	}
	f := os.NewFile(uintptr(out), name)
	defer f.Close()
	if _, err := f.Write(s.Content); err != nil {
		return ap.hostErr(p, err)
	}
	if err := unix.Fchmod(out, mode); err != nil {
		return ap.hostErr(p, err)
	}
	return ap.hostErr(p, f.Close())
}

// hostErr types an error of the host directory itself, naming it.
func hostErr(op, hostPath string, err error) error {
	return errs.Host(op, hostPath, fmt.Errorf("host path %s: %w", hostPath, err))
}
