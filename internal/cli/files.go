package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// ioStep is how much file data one read or one write step moves: the
// bound on what a streaming command holds in memory.
const ioStep = 1 << 20

// fileCmds are the commands that work on files inside the selected vault.
func (a *app) fileCmds() []*cobra.Command {
	return []*cobra.Command{a.lsCmd(), a.treeCmd(), a.statCmd(), a.catCmd(), a.writeCmd(), a.mkdirCmd(),
		a.rmCmd(), a.cpCmd(), a.mvCmd(), a.lnCmd(), a.chmodCmd()}
}

// view runs fn read-only on the selected vault's working state. An error
// that names no full vault path is given p, the path the command is about.
func (a *app) view(p string, fn func(tx *vfs.Tx) (any, error)) (any, error) {
	return a.withVault(func(_ *registry.Home, v *vfs.Vault) (res any, err error) {
		err = v.View(func(tx *vfs.Tx) error {
			res, err = fn(tx)
			return err
		})
		return res, withPath(err, cleanOr(p))
	})
}

// update runs fn in one write transaction on the selected vault: on error
// nothing of it is kept. Errors get p as view's do.
func (a *app) update(p string, fn func(tx *vfs.Tx) (any, error)) (any, error) {
	return a.withVault(func(_ *registry.Home, v *vfs.Vault) (res any, err error) {
		err = v.Update(func(tx *vfs.Tx) error {
			res, err = fn(tx)
			return err
		})
		if err == nil {
			collectAfterWrite(v)
		}
		return res, withPath(err, cleanOr(p))
	})
}

// cleanOr is the clean form of p, or "" when p is not a valid path.
func cleanOr(p string) string {
	c, err := vfs.CleanPath(p)
	if err != nil {
		return ""
	}
	return c
}

// entry is one file in ls output.
type entry struct {
	Name     string    `json:"name"`
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Mode     string    `json:"mode"`
	Modified time.Time `json:"modified"`
	Ino      uint64    `json:"ino"`
	Nlink    uint32    `json:"nlink"`
	Target   *string   `json:"target,omitempty"` // symlinks only
	typ      vfs.FileType
	perm     uint32
}

func entryOf(tx *vfs.Tx, name string, at vfs.Attr) (entry, error) {
	e := entry{Name: name, Type: at.Type.String(), Size: int64(at.Size), Mode: octal(at.Mode),
		Modified: utc(at.Mtime), Ino: uint64(at.Ino), Nlink: at.Nlink, typ: at.Type, perm: at.Mode}
	if at.Type == vfs.TypeSymlink {
		t, err := tx.Readlink(at.Ino)
		if err != nil {
			return e, err
		}
		e.Target = &t
	}
	return e, nil
}

func baseName(clean string) string {
	if clean == "/" {
		return "/"
	}
	_, name := vfs.SplitPath(clean)
	return name
}

type lsResult struct {
	Path    string  `json:"path"`
	Entries []entry `json:"entries"`
	long    bool
}

func (r lsResult) human(w io.Writer) {
	if !r.long {
		for _, e := range r.Entries {
			fmt.Fprintln(w, e.Name)
		}
		return
	}
	var wl, ws int
	for _, e := range r.Entries {
		wl = max(wl, len(fmt.Sprint(e.Nlink)))
		ws = max(ws, len(fmt.Sprint(e.Size)))
	}
	for _, e := range r.Entries {
		name := e.Name
		if e.Target != nil {
			name += " -> " + *e.Target
		}
		fmt.Fprintf(w, "%s %*d %*d %s %s\n", modeString(e.typ, e.perm), wl, e.Nlink, ws, e.Size,
			e.Modified.Local().Format("2006-01-02 15:04"), name)
	}
}

func (a *app) lsCmd() *cobra.Command {
	var long, all bool
	var at string
	c := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory of the vault",
		Long: `List directory PATH of the selected vault (default /), sorted by name. Names
starting with . are left out unless -a is given. A PATH that is not a
directory lists itself. JSON output always carries every field; -l only
changes the human form. --at REF lists the directory as a past state held
it. ` + refHelp,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.viewAt(at, argOr(args, 0, "/"), func(tx *vfs.Tx) (any, error) {
				clean, err := vfs.CleanPath(argOr(args, 0, "/"))
				if err != nil {
					return nil, err
				}
				r := lsResult{Path: clean, Entries: []entry{}, long: long}
				at, err := tx.Resolve(clean, true)
				if err != nil {
					return nil, err
				}
				if at.Type != vfs.TypeDir {
					if at, err = tx.Resolve(clean, false); err != nil {
						return nil, err
					}
					e, err := entryOf(tx, baseName(clean), at)
					r.Entries = append(r.Entries, e)
					return r, err
				}
				ents, err := tx.ReadDir(at.Ino)
				if err != nil {
					return nil, err
				}
				for _, de := range ents {
					if !all && strings.HasPrefix(de.Name, ".") {
						continue
					}
					at, err := tx.GetAttr(de.Ino)
					if err != nil {
						return nil, err
					}
					e, err := entryOf(tx, de.Name, at)
					if err != nil {
						return nil, err
					}
					r.Entries = append(r.Entries, e)
				}
				return r, nil
			})
		}),
	}
	c.Flags().BoolVarP(&long, "long", "l", false, "long listing: mode, links, size, time")
	c.Flags().BoolVarP(&all, "all", "a", false, "include names starting with .")
	atFlag(c, &at)
	return c
}

// treeNode is one file of tree output. Children is absent for
// non-directories, empty directories and directories beyond -L.
type treeNode struct {
	Name     string     `json:"name"`
	Type     string     `json:"type"`
	Size     int64      `json:"size"`
	Mode     string     `json:"mode"`
	Target   *string    `json:"target,omitempty"`
	Children []treeNode `json:"children,omitempty"`
}

type treeResult struct {
	Path        string   `json:"path"`
	Root        treeNode `json:"root"`
	Directories int      `json:"directories"`
	Files       int      `json:"files"`
}

func (r treeResult) human(w io.Writer) {
	fmt.Fprintln(w, r.Root.Name)
	var walk func(n treeNode, prefix string)
	walk = func(n treeNode, prefix string) {
		for i, c := range n.Children {
			branch, next := "├── ", "│   "
			if i == len(n.Children)-1 {
				branch, next = "└── ", "    "
			}
			name := c.Name
			if c.Target != nil {
				name += " -> " + *c.Target
			}
			fmt.Fprintln(w, prefix+branch+name)
			walk(c, prefix+next)
		}
	}
	walk(r.Root, "")
	fmt.Fprintf(w, "\n%d directories, %d files\n", r.Directories, r.Files)
}

func (a *app) treeCmd() *cobra.Command {
	var depth int
	var all bool
	var at string
	c := &cobra.Command{
		Use:   "tree [PATH]",
		Short: "Show the tree below a directory of the vault",
		Long: `Show the tree below PATH (default /). -L limits the depth (0: no limit).
Names starting with . are left out unless -a is given. The counts do not
include PATH itself. --at REF shows the tree a past state held.
` + refHelp,
		Args: rangeArgs(0, 1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			if depth < 0 {
				return nil, invalidf("tree", "-L must be 0 (no limit) or positive")
			}
			return a.viewAt(at, argOr(args, 0, "/"), func(tx *vfs.Tx) (any, error) {
				clean, err := vfs.CleanPath(argOr(args, 0, "/"))
				if err != nil {
					return nil, err
				}
				at, err := tx.Resolve(clean, true)
				if err != nil {
					return nil, err
				}
				r := treeResult{Path: clean}
				var dirs vfs.DirWalk
				var walk func(name string, at vfs.Attr, level int) (treeNode, error)
				walk = func(name string, at vfs.Attr, level int) (treeNode, error) {
					e, err := entryOf(tx, name, at)
					n := treeNode{Name: name, Type: e.Type, Size: e.Size, Mode: e.Mode, Target: e.Target}
					if err != nil || at.Type != vfs.TypeDir || (depth > 0 && level >= depth) {
						return n, err
					}
					if err := dirs.Enter(at.Ino); err != nil {
						return n, err
					}
					ents, err := tx.ReadDir(at.Ino)
					if err != nil {
						return n, err
					}
					for _, de := range ents {
						if !all && strings.HasPrefix(de.Name, ".") {
							continue
						}
						cat, err := tx.GetAttr(de.Ino)
						if err != nil {
							return n, err
						}
						if cat.Type == vfs.TypeDir {
							r.Directories++
						} else {
							r.Files++
						}
						child, err := walk(de.Name, cat, level+1)
						if err != nil {
							return n, err
						}
						n.Children = append(n.Children, child)
					}
					return n, nil
				}
				r.Root, err = walk(clean, at, 0)
				return r, err
			})
		}),
	}
	c.Flags().IntVarP(&depth, "level", "L", 0, "descend at most this many levels (0: no limit)")
	c.Flags().BoolVarP(&all, "all", "a", false, "include names starting with .")
	atFlag(c, &at)
	return c
}

type statResult struct {
	Path   string    `json:"path"`
	Type   string    `json:"type"`
	Size   int64     `json:"size"`
	Mode   string    `json:"mode"`
	Ino    uint64    `json:"ino"`
	Nlink  uint32    `json:"nlink"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Target *string   `json:"target,omitempty"`
	Xattrs []string  `json:"xattrs"`
	typ    vfs.FileType
	perm   uint32
}

func (r statResult) human(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "path\t%s\n", r.Path)
	if r.Target != nil {
		fmt.Fprintf(tw, "target\t%s\n", *r.Target)
	}
	fmt.Fprintf(tw, "type\t%s\n", r.Type)
	fmt.Fprintf(tw, "size\t%d\n", r.Size)
	fmt.Fprintf(tw, "mode\t%s (%s)\n", r.Mode, modeString(r.typ, r.perm))
	fmt.Fprintf(tw, "inode\t%d\nlinks\t%d\nuid/gid\t%d/%d\n", r.Ino, r.Nlink, r.UID, r.GID)
	for _, t := range []struct {
		n string
		t time.Time
	}{{"access", r.Atime}, {"modify", r.Mtime}, {"change", r.Ctime}} {
		fmt.Fprintf(tw, "%s\t%s\n", t.n, t.t.Format(time.RFC3339Nano))
	}
	if len(r.Xattrs) > 0 {
		fmt.Fprintf(tw, "xattrs\t%s\n", strings.Join(r.Xattrs, ", "))
	}
	tw.Flush()
}

func (a *app) statCmd() *cobra.Command {
	var follow bool
	var at string
	c := &cobra.Command{
		Use:   "stat PATH",
		Short: "Show the attributes of a file in the vault",
		Long: `Show the attributes of PATH. A symlink is described itself, with its target,
unless -L is given. --at REF describes it as a past state held it.
` + refHelp,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.viewAt(at, args[0], func(tx *vfs.Tx) (any, error) {
				clean, err := vfs.CleanPath(args[0])
				if err != nil {
					return nil, err
				}
				at, err := tx.Resolve(clean, follow)
				if err != nil {
					return nil, err
				}
				e, err := entryOf(tx, clean, at)
				if err != nil {
					return nil, err
				}
				xs, err := tx.ListXattr(at.Ino)
				if err != nil {
					return nil, err
				}
				if xs == nil {
					xs = []string{}
				}
				return statResult{Path: clean, Type: e.Type, Size: e.Size, Mode: e.Mode, Ino: e.Ino, Nlink: at.Nlink,
					UID: at.Uid, GID: at.Gid, Atime: utc(at.Atime), Mtime: utc(at.Mtime), Ctime: utc(at.Ctime),
					Target: e.Target, Xattrs: xs, typ: at.Type, perm: at.Mode}, nil
			})
		}),
	}
	c.Flags().BoolVarP(&follow, "dereference", "L", false, "follow a symlink at PATH")
	atFlag(c, &at)
	return c
}

func (a *app) catCmd() *cobra.Command {
	var at string
	c := &cobra.Command{
		Use:   "cat PATH",
		Short: "Print a file of the vault",
		Long: `Print file PATH to standard output, streamed in 1 MiB steps from one
consistent state of the vault.

With --json the document is {"path","size","encoding","content"}: encoding is
"utf-8" when the file is valid UTF-8 (content is then the text) and "base64"
otherwise. --at REF prints the file as a past state held it.
` + refHelp,
		Args: exactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.viewAt(at, args[0], func(tx *vfs.Tx) (any, error) {
				clean, err := vfs.CleanPath(args[0])
				if err != nil {
					return nil, err
				}
				at, err := tx.Resolve(clean, true)
				if err != nil {
					return nil, err
				}
				if at.Type != vfs.TypeFile {
					return nil, &errs.Error{Kind: errs.NotAFile, Op: "cat", Path: clean, Errno: syscall.EISDIR,
						Err: fmt.Errorf("not a regular file (%s)", at.Type)}
				}
				if !a.jsonOut {
					return nil, a.stream(tx, at, a.env.Stdout)
				}
				return nil, a.catJSON(tx, clean, at)
			})
		}),
	}
	atFlag(c, &at)
	return c
}

// stream copies a file's content to w, one step at a time.
func (a *app) stream(tx *vfs.Tx, at vfs.Attr, w io.Writer) error {
	buf := make([]byte, min(ioStep, max(int64(at.Size), 1)))
	for off := int64(0); off < int64(at.Size); {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		n, err := tx.Read(at.Ino, off, buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return &errs.Error{Kind: errs.IoError, Op: "cat", Err: err}
		}
		off += int64(n)
	}
	return nil
}

// catJSON writes the cat document without holding the file in memory: a
// first pass decides the encoding, a second streams the content.
func (a *app) catJSON(tx *vfs.Tx, clean string, at vfs.Attr) error {
	check := &utf8Checker{valid: true}
	if err := a.stream(tx, at, check); err != nil {
		return err
	}
	encoding := "base64"
	if check.done() {
		encoding = "utf-8"
	}
	w := a.env.Stdout
	p, _ := json.Marshal(clean)
	fmt.Fprintf(w, "{\n  \"path\": %s,\n  \"size\": %d,\n  \"encoding\": %q,\n  \"content\": \"", p, at.Size, encoding)
	var body io.Writer = jsonStringWriter{w}
	var closer io.Closer
	if encoding == "base64" {
		enc := base64.NewEncoder(base64.StdEncoding, w)
		body, closer = enc, enc
	}
	if err := a.stream(tx, at, body); err != nil {
		return err
	}
	if closer != nil {
		closer.Close()
	}
	_, err := io.WriteString(w, "\"\n}\n")
	return err
}

// utf8Checker is a writer that tells whether everything written was UTF-8,
// across writes that split a character.
type utf8Checker struct {
	valid bool
	carry []byte
}

func (c *utf8Checker) Write(p []byte) (int, error) {
	n := len(p)
	// Finish a character split by the previous write, byte by byte.
	for c.valid && len(c.carry) > 0 && len(p) > 0 {
		c.carry, p = append(c.carry, p[0]), p[1:]
		if utf8.FullRune(c.carry) {
			if r, size := utf8.DecodeRune(c.carry); r == utf8.RuneError && size == 1 {
				c.valid = false
			}
			c.carry = c.carry[:0]
		}
	}
	if !c.valid || len(p) == 0 {
		return n, nil
	}
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-3; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(p[:cut]) {
		c.valid = false
		return n, nil
	}
	c.carry = append(c.carry[:0], p[cut:]...)
	return n, nil
}

func (c *utf8Checker) done() bool { return c.valid && len(c.carry) == 0 }

// jsonStringWriter writes valid UTF-8 as the inside of a JSON string.
type jsonStringWriter struct{ w io.Writer }

func (j jsonStringWriter) Write(p []byte) (int, error) {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, len(p)+len(p)/8)
	for _, b := range p {
		switch {
		case b == '"' || b == '\\':
			out = append(out, '\\', b)
		case b == '\n':
			out = append(out, '\\', 'n')
		case b == '\r':
			out = append(out, '\\', 'r')
		case b == '\t':
			out = append(out, '\\', 't')
		case b < 0x20 || b == 0x7f:
			out = append(out, '\\', 'u', '0', '0', hex[b>>4], hex[b&15])
		default:
			out = append(out, b)
		}
	}
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
