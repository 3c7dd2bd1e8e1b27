package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

type applyEntry struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // added, modified, deleted, mode_changed, type_changed
}

type applyNote struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

type applyResult struct {
	From      string       `json:"from"`
	To        string       `json:"to"`
	HostDir   string       `json:"host_dir"`
	DryRun    bool         `json:"dry_run"`
	Applied   []applyEntry `json:"applied"`
	Conflicts []applyNote  `json:"conflicts"`
	Skipped   []applyNote  `json:"skipped"`
}

func (r applyResult) human(w io.Writer) {
	for _, e := range r.Applied {
		fmt.Fprintf(w, "%s %s\n", e.Kind, e.Path)
	}
	for _, c := range r.Conflicts {
		fmt.Fprintf(w, "CONFLICT %s: %s\n", c.Path, c.Reason)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Path, s.Reason)
	}
	verb := "applied"
	if r.DryRun {
		verb = "would apply"
	}
	fmt.Fprintf(w, "%s %d changes to %s, %d conflicts\n", verb, len(r.Applied), r.HostDir, len(r.Conflicts))
}

func (a *app) applyCmd() *cobra.Command {
	var from, to string
	var dry, force bool
	c := &cobra.Command{
		Use:   "apply HOST_DIR",
		Short: "Write a vault's changes into a host directory",
		Long: `Write the changes between FROM (default: the recorded origin of the selected
vault, or of its parent for a fork: see vault create --from) and TO
(default: the working state) into HOST_DIR. ` + refHelp + `

A host file that no longer holds what FROM held is a conflict: reported
and left alone, unless --force. Files already as TO are skipped. Modes are
kept (not setuid or setgid); nothing is written outside HOST_DIR: no
symlink in the host tree is followed, files are created with O_NOFOLLOW.
Applying the output of "avfs diff FROM TO --patch" with git apply gives
the same tree.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			_, r, err := a.resolver()
			if err != nil {
				return nil, err
			}
			defer r.Close()
			if from == "" {
				if from, err = a.originRef(r); err != nil {
					return nil, err
				}
			}
			fs, err := r.Resolve(from)
			if err != nil {
				return nil, err
			}
			ts, err := r.Resolve(orDefault(to, refs.Working))
			if err != nil {
				return nil, err
			}
			return a.applyTo(args[0], fs, ts, dry, force)
		}),
	}
	c.Flags().StringVar(&from, "from", "", "the REF the host directory holds (default: the recorded origin)")
	c.Flags().StringVar(&to, "to", "", "the REF to write (default: @, the working state)")
	c.Flags().BoolVar(&dry, "dry-run", false, "report what would be written and what conflicts, write nothing")
	c.Flags().BoolVarP(&force, "force", "f", false, "overwrite host files that no longer match FROM")
	return c
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// originRef is the REF of the selected vault's recorded origin, or its
// parent's when it is a fork without one.
func (a *app) originRef(r *refs.Resolver) (string, error) {
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

func (a *app) applyTo(hostDir string, from, to refs.State, dry, force bool) (any, error) {
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
	res := applyResult{From: from.Name, To: to.Name, HostDir: abs, DryRun: dry,
		Applied: []applyEntry{}, Conflicts: []applyNote{}, Skipped: []applyNote{}}
	ap := &applier{root: root, host: abs}
	type todo struct {
		i    int
		kind string
	}
	var plan []todo
	for i, p := range paths {
		if err := a.ctx.Err(); err != nil {
			return nil, err
		}
		b, t := before[i], after[i]
		if t.Exists && !hostKind(t.Type) || b.Exists && !hostKind(b.Type) && !t.Exists {
			res.Skipped = append(res.Skipped, applyNote{p, t.Type.String() + " files are not applied"})
			continue
		}
		h := ap.stat(p)
		switch {
		case h.through:
			res.Conflicts = append(res.Conflicts, applyNote{p, "a parent on the host is not a directory (a symlink is never followed)"})
			continue
		case h.matches(t, true):
			res.Skipped = append(res.Skipped, applyNote{p, "the host already holds it"})
			continue
		case !h.matches(b, false) && !force:
			res.Conflicts = append(res.Conflicts, applyNote{p, "the host file changed since " + from.Name})
			continue
		}
		plan = append(plan, todo{i, string(changes[i].Kind)})
	}
	for _, s := range plan {
		res.Applied = append(res.Applied, applyEntry{paths[s.i], s.kind})
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
			res.Conflicts = append(res.Conflicts, applyNote{paths[i], "the host directory holds files the vault does not"})
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
