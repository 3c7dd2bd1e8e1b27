package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

type writeResult struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Written  int64  `json:"bytes_written"`
	Appended bool   `json:"appended"`
	Created  bool   `json:"created"`
}

func (r writeResult) human(io.Writer) {}

func (a *app) writeCmd() *cobra.Command {
	var appendFlag bool
	c := &cobra.Command{
		Use:   "write PATH [CONTENT]",
		Short: "Write a file of the vault from an argument or standard input",
		Long: `Write CONTENT (or, when it is left out, standard input) to file PATH, creating
it (mode 0644) or replacing what it held; --append adds to the end instead.
The parent directory must exist.

The write is all or nothing. Content up to 1 MiB is written in one
transaction; longer content is staged in 1 MiB transactions, so memory
stays bounded, and put in place by the last one: a write refused half-way
(a quota) or interrupted leaves the file as it was, or absent.`,
		Args: rangeArgs(1, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			clean, err := vfs.CleanPath(args[0])
			if err != nil {
				return nil, err
			}
			src := a.env.Stdin
			if len(args) == 2 {
				src = strings.NewReader(args[1])
			}
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				r, err := a.writeStream(v, clean, src, appendFlag)
				if err == nil {
					collectAfterWrite(v)
				}
				return r, withPath(err, clean)
			})
		}),
	}
	c.Flags().BoolVar(&appendFlag, "append", false, "append instead of replacing the content")
	return c
}

// writeStream writes src to the file at clean, all or nothing (see
// vfs.Vault.WriteFrom, which the MCP server's file_write uses too).
func (a *app) writeStream(v *vfs.Vault, clean string, src io.Reader, appendTo bool) (any, error) {
	w, err := v.WriteFrom(a.ctx, clean, src, vfs.WriteOptions{Append: appendTo, Mode: 0o644})
	if err != nil {
		return nil, err
	}
	return writeResult{Path: clean, Size: w.Size, Written: w.Written, Appended: appendTo, Created: w.Created}, nil
}

type mkdirResult struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
	Mode    string `json:"mode"`
}

func (r mkdirResult) human(io.Writer) {}

func (a *app) mkdirCmd() *cobra.Command {
	var parents bool
	c := &cobra.Command{
		Use:   "mkdir PATH",
		Short: "Create a directory in the vault",
		Long: `Create directory PATH (mode 0755). With -p, missing parents are created too
and an existing directory is not an error.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.update(args[0], func(tx *vfs.Tx) (any, error) {
				clean, err := vfs.CleanPath(args[0])
				if err != nil {
					return nil, err
				}
				if parents {
					before, err := tx.Resolve(clean, true)
					existed := err == nil && before.Type == vfs.TypeDir
					at, err := tx.MkdirAll(clean, 0o755)
					return mkdirResult{Path: clean, Created: !existed, Mode: octal(at.Mode)}, err
				}
				dir, name, err := tx.ResolveParent(clean)
				if err != nil {
					return nil, err
				}
				at, err := tx.Mkdir(dir, name, 0o755, 0, 0)
				return mkdirResult{Path: clean, Created: true, Mode: octal(at.Mode)}, err
			})
		}),
	}
	c.Flags().BoolVarP(&parents, "parents", "p", false, "create missing parents; no error if PATH exists")
	return c
}

type rmResult vfs.Removed

func (r rmResult) human(io.Writer) {}

func (a *app) rmCmd() *cobra.Command {
	var recursive, force bool
	c := &cobra.Command{
		Use:   "rm PATH",
		Short: "Remove a file or, with -r, a directory tree from the vault",
		Long: `Remove PATH. A directory needs -r, which removes everything below it; symlinks
are removed, never followed. -f makes a missing PATH not an error. The whole
removal is one transaction. The vault root cannot be removed.`,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.update(args[0], func(tx *vfs.Tx) (any, error) {
				r, err := tx.Remove(args[0], recursive, force)
				return rmResult(r), err
			})
		}),
	}
	c.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their content")
	c.Flags().BoolVarP(&force, "force", "f", false, "ignore a missing PATH")
	return c
}

type copyResult struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Files    int    `json:"files"`
	Dirs     int    `json:"dirs"`
	Symlinks int    `json:"symlinks"`
	Bytes    int64  `json:"bytes"`
}

func (r copyResult) human(io.Writer) {}

func (a *app) cpCmd() *cobra.Command {
	var recursive bool
	c := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file or, with -r, a directory tree inside the vault",
		Long: `Copy SRC to DST, or into DST when DST is a directory. A directory needs -r;
with -r symlinks are copied as links, without it a symlink SRC is followed.
Existing files are replaced, existing directories merged. Modes are kept.
The copy is one transaction; file data is stored once per vault, so a copy
adds no data, only references.`,
		Args: exactArgs(2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.update(args[1], func(tx *vfs.Tx) (any, error) {
				r, err := tx.Copy(args[0], args[1], recursive)
				return copyResult{From: r.From, To: r.To, Files: r.Files, Dirs: r.Dirs, Symlinks: r.Symlinks, Bytes: r.Bytes}, err
			})
		}),
	}
	c.Flags().BoolVarP(&recursive, "recursive", "r", false, "copy directories and their content")
	return c
}

type moveResult struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func (r moveResult) human(io.Writer) {}

func (a *app) mvCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mv SRC DST",
		Short: "Move or rename a file or directory inside the vault",
		Long: `Move SRC to DST, or into DST when DST is a directory. An existing file at the
destination is replaced; a directory only by moving into it. O(1): nothing
is copied.`,
		Args: exactArgs(2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.update(args[1], func(tx *vfs.Tx) (any, error) {
				src, err := vfs.CleanPath(args[0])
				if err != nil {
					return nil, err
				}
				to, err := tx.Move(src, args[1])
				return moveResult{From: src, To: to}, err
			})
		}),
	}
}

type linkResult struct {
	Path   string `json:"path"`
	Target string `json:"target"`
	Type   string `json:"type"` // "symlink" or "hardlink"
}

func (r linkResult) human(io.Writer) {}

func (a *app) lnCmd() *cobra.Command {
	var symbolic bool
	c := &cobra.Command{
		Use:   "ln TARGET PATH",
		Short: "Make a hard link, or with -s a symbolic link, in the vault",
		Long: `Make PATH (or PATH/name of TARGET, when PATH is a directory) a new name for
TARGET. With -s PATH becomes a symbolic link whose text is TARGET, stored
as given; it resolves inside the vault, never on the host. Without -s,
TARGET must exist and not be a directory.`,
		Args: exactArgs(2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.update(args[1], func(tx *vfs.Tx) (any, error) {
				p, err := vfs.CleanPath(args[1])
				if err != nil {
					return nil, err
				}
				r := linkResult{Target: args[0], Type: "hardlink"}
				name := args[0]
				if i := strings.LastIndexByte(strings.TrimRight(name, "/"), '/'); i >= 0 {
					name = strings.TrimRight(name, "/")[i+1:]
				}
				var at vfs.Attr
				if !symbolic {
					if r.Target, err = vfs.CleanPath(args[0]); err != nil {
						return nil, err
					}
					if at, err = tx.Resolve(r.Target, false); err != nil {
						return nil, err
					}
					name = baseName(r.Target)
				}
				dir, lname, err := tx.Target(p, name)
				if err != nil {
					return nil, err
				}
				if symbolic {
					r.Type = "symlink"
					if strings.ContainsRune(args[0], 0) || args[0] == "" {
						return nil, invalidf("ln", "invalid symlink target %q", args[0])
					}
					_, err = tx.Symlink(dir, lname, args[0], 0, 0)
				} else {
					_, err = tx.Link(at.Ino, dir, lname)
				}
				if err != nil {
					return nil, err
				}
				d, err := tx.PathOf(dir)
				r.Path = strings.TrimSuffix(d, "/") + "/" + lname
				return r, err
			})
		}),
	}
	c.Flags().BoolVarP(&symbolic, "symbolic", "s", false, "make a symbolic link")
	return c
}

type chmodResult struct {
	Path     string `json:"path"`
	Mode     string `json:"mode"`
	Previous string `json:"previous_mode"`
}

func (r chmodResult) human(io.Writer) {}

func (a *app) chmodCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "chmod MODE PATH",
		Short: "Change the permission bits of a file in the vault",
		Long: `Set the permission bits of PATH (a symlink is followed) to MODE: octal, as
0644 or 755, or symbolic, as u+x, go-w or a=rX (comma-separated clauses;
no umask applies).`,
		Args: exactArgs(2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.update(args[1], func(tx *vfs.Tx) (any, error) {
				clean, err := vfs.CleanPath(args[1])
				if err != nil {
					return nil, err
				}
				at, err := tx.Resolve(clean, true)
				if err != nil {
					return nil, err
				}
				mode, err := parseMode(args[0], at.Mode, at.Type == vfs.TypeDir)
				if err != nil {
					return nil, err
				}
				if _, err := tx.SetAttr(at.Ino, vfs.SetAttr{Mode: &mode}); err != nil {
					return nil, err
				}
				return chmodResult{Path: clean, Mode: octal(mode), Previous: octal(at.Mode)}, nil
			})
		}),
	}
}
