package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Paths are inside the vault, slash-separated; a relative path is taken
// from the root.

// Encodings of file content.
const (
	encText   = "utf-8"
	encBase64 = "base64"
)

// MaxRead is the most file_read returns of a file by default.
const MaxRead = 1 << 20

// view and update run fn in one read or write transaction of the call's
// vault's working state.
func (s *server) view(vault string, fn func(tx *vfs.Tx) error) error {
	return s.withVault(vault, func(v *vfs.Vault) error { return v.View(fn) })
}

func (s *server) update(vault string, fn func(tx *vfs.Tx) error) error {
	return s.withVault(vault, func(v *vfs.Vault) error { return v.Update(fn) })
}

// FileReadArgs are file_read's arguments.
type FileReadArgs struct {
	VaultArg
	Path     string `json:"path" jsonschema:"the file to read"`
	Head     int    `json:"head,omitempty" jsonschema:"return only the first this many lines"`
	Tail     int    `json:"tail,omitempty" jsonschema:"return only the last this many lines"`
	MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"return at most this many bytes (default 1 MiB)"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8 or base64 (default: utf-8 for text, base64 for anything else)"`
}

// FileContent is file_read's result.
type FileContent struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"` // the whole file's
	Encoding  string `json:"encoding"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"` // head, tail or max_bytes left some out
}

func fileRead(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileReadArgs) (out FileContent, err error) {
	if in.Head < 0 || in.Tail < 0 || in.MaxBytes < 0 || (in.Head > 0 && in.Tail > 0) {
		return out, errs.New(errs.InvalidInput, "cat", "give head or tail, each a positive number of lines, and max_bytes positive")
	}
	if in.Encoding != "" && in.Encoding != encText && in.Encoding != encBase64 {
		return out, errs.New(errs.InvalidInput, "cat", "encoding is utf-8 or base64, not %q", in.Encoding)
	}
	max := in.MaxBytes
	if max == 0 {
		max = MaxRead
	}
	var data []byte
	err = s.view(in.Vault, func(tx *vfs.Tx) error {
		clean, err := vfs.CleanPath(in.Path)
		if err != nil {
			return err
		}
		out.Path = clean
		data, err = tx.ReadFile(clean)
		return withPath(err, clean)
	})
	if err != nil {
		return out, err
	}
	out.Size = int64(len(data))
	part := data
	switch {
	case in.Head > 0:
		part = headLines(data, in.Head)
	case in.Tail > 0:
		part = tailLines(data, in.Tail)
	}
	if int64(len(part)) > max {
		part = part[:max]
	}
	out.Truncated = len(part) < len(data)
	out.Encoding = in.Encoding
	if out.Encoding == "" {
		out.Encoding = encBase64
		if utf8.Valid(part) && bytes.IndexByte(part, 0) < 0 {
			out.Encoding = encText
		}
	}
	if out.Encoding == encText && !utf8.Valid(part) {
		return out, &errs.Error{Kind: errs.InvalidInput, Op: "cat", Path: out.Path, Err: fmt.Errorf("the content is not UTF-8 text"),
			Hint: "read it with encoding base64"}
	}
	out.Content = string(part)
	if out.Encoding == encBase64 {
		out.Content = base64.StdEncoding.EncodeToString(part)
	}
	return out, nil
}

func headLines(b []byte, n int) []byte {
	end := 0
	for i := 0; i < n && end < len(b); i++ {
		j := bytes.IndexByte(b[end:], '\n')
		if j < 0 {
			return b
		}
		end += j + 1
	}
	return b[:end]
}

func tailLines(b []byte, n int) []byte {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end-- // the last line's newline ends it; it does not start another
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return b
		}
		if i == n-1 {
			return b[j+1:]
		}
		end = j
	}
	return b
}

// withPath names p in an error that names no path.
func withPath(err error, p string) error {
	var e *errs.Error
	if err != nil && errors.As(err, &e) && e.Path == "" {
		c := *e
		c.Path = p
		return &c
	}
	return err
}

// FileWriteArgs are file_write's arguments.
type FileWriteArgs struct {
	VaultArg
	Path       string `json:"path" jsonschema:"the file to create or replace"`
	Content    string `json:"content" jsonschema:"the file's new content"`
	Encoding   string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64, how content is given"`
	Mode       string `json:"mode,omitempty" jsonschema:"the permissions of a new file, in octal (default 0644)"`
	CreateDirs bool   `json:"create_dirs,omitempty" jsonschema:"create missing parent directories"`
}

// Written is file_write's result.
type Written struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Created bool   `json:"created"`
}

// fileWrite writes through vfs.Vault.WriteFrom, as the CLI's write does:
// content over one step is staged across transactions and put in place by
// the last, so a write refused half-way (a quota) changes nothing, parent
// directories of create_dirs included.
func fileWrite(s *server, ctx context.Context, _ *mcp.CallToolRequest, in FileWriteArgs) (out Written, err error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case "", encText:
	case encBase64:
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return out, errs.New(errs.InvalidInput, "write", "content is not base64: %v", err)
		}
	default:
		return out, errs.New(errs.InvalidInput, "write", "encoding is utf-8 or base64, not %q", in.Encoding)
	}
	mode, err := parseMode(in.Mode, 0o644)
	if err != nil {
		return out, err
	}
	clean, err := vfs.CleanPath(in.Path)
	if err != nil {
		return out, err
	}
	err = s.withVault(in.Vault, func(v *vfs.Vault) error {
		w, err := v.WriteFrom(ctx, clean, bytes.NewReader(data), vfs.WriteOptions{Mode: mode, MakeParents: in.CreateDirs})
		out = Written{Path: clean, Size: w.Size, Created: w.Created}
		return err
	})
	return out, withPath(err, clean)
}

func parseMode(s string, def uint32) (uint32, error) {
	if s == "" {
		return def, nil
	}
	var m uint32
	if _, err := fmt.Sscanf(strings.TrimPrefix(s, "0o"), "%o", &m); err != nil || m > 0o7777 {
		return 0, errs.New(errs.InvalidInput, "write", "mode wants octal permissions such as 0644, not %q", s)
	}
	return m, nil
}

// FileEditArgs are file_edit's arguments.
type FileEditArgs struct {
	VaultArg
	Path   string     `json:"path" jsonschema:"the file to edit"`
	Edits  []vfs.Edit `json:"edits" jsonschema:"the edits, applied in order"`
	DryRun bool       `json:"dry_run,omitempty" jsonschema:"show the result without writing it"`
}

// Edited is file_edit's result.
type Edited struct {
	Path         string `json:"path"`
	DryRun       bool   `json:"dry_run"`
	Replacements []int  `json:"replacements"` // per edit
	SizeBefore   int64  `json:"size_before"`
	SizeAfter    int64  `json:"size_after"`
	// Content is the edited content, on a dry run of a text file.
	Content *string `json:"content,omitempty"`
}

func fileEdit(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileEditArgs) (out Edited, err error) {
	clean, err := vfs.CleanPath(in.Path)
	if err != nil {
		return out, err
	}
	run := s.update
	if in.DryRun {
		run = s.view
	}
	err = run(in.Vault, func(tx *vfs.Tx) error {
		before, after, counts, err := tx.EditFile(clean, in.Edits, in.DryRun)
		out = Edited{Path: clean, DryRun: in.DryRun, Replacements: counts, SizeBefore: int64(len(before)), SizeAfter: int64(len(after))}
		if in.DryRun && utf8.Valid(after) {
			c := string(after)
			out.Content = &c
		}
		return err
	})
	return out, withPath(err, clean)
}

// FileListArgs are file_list's arguments.
type FileListArgs struct {
	VaultArg
	Path      string `json:"path,omitempty" jsonschema:"the directory to list (default /)"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list the whole tree below it"`
}

// Entry is one file of a listing.
type Entry struct {
	Path     string    `json:"path"`
	Type     string    `json:"type"` // file, dir, symlink, fifo, socket, char, block
	Size     int64     `json:"size"`
	Mode     string    `json:"mode"` // octal permissions
	Modified time.Time `json:"modified"`
	Target   string    `json:"target,omitempty"` // symlinks only
}

// Listing is file_list's result.
type Listing struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries"`
}

func fileList(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileListArgs) (out Listing, err error) {
	if in.Path == "" {
		in.Path = "/"
	}
	clean, err := vfs.CleanPath(in.Path)
	if err != nil {
		return out, err
	}
	out = Listing{Path: clean, Entries: []Entry{}}
	err = s.view(in.Vault, func(tx *vfs.Tx) error {
		a, err := tx.Resolve(clean, true)
		if err != nil {
			return err
		}
		if a.Type != vfs.TypeDir {
			return &errs.Error{Kind: errs.NotADirectory, Op: "ls", Path: clean, Err: fmt.Errorf("not a directory")}
		}
		return list(tx, &vfs.DirWalk{}, clean, a.Ino, in.Recursive, &out.Entries)
	})
	return out, withPath(err, clean)
}

func list(tx *vfs.Tx, w *vfs.DirWalk, dir string, ino vfs.Ino, recursive bool, out *[]Entry) error {
	if err := w.Enter(ino); err != nil {
		return err
	}
	ents, err := tx.ReadDir(ino)
	if err != nil {
		return err
	}
	for _, e := range ents {
		a, err := tx.GetAttr(e.Ino)
		if err != nil {
			return err
		}
		p := strings.TrimSuffix(dir, "/") + "/" + e.Name
		en, err := entryOf(tx, p, a)
		if err != nil {
			return err
		}
		*out = append(*out, en)
		if recursive && a.Type == vfs.TypeDir {
			if err := list(tx, w, p, a.Ino, true, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func entryOf(tx *vfs.Tx, p string, a vfs.Attr) (Entry, error) {
	e := Entry{Path: p, Type: a.Type.String(), Mode: fmt.Sprintf("%04o", fs.FileMode(a.Mode).Perm()), Modified: a.Mtime.UTC()}
	if a.Type == vfs.TypeFile {
		e.Size = int64(a.Size)
	}
	if a.Type == vfs.TypeSymlink {
		t, err := tx.Readlink(a.Ino)
		if err != nil {
			return e, err
		}
		e.Target = t
	}
	return e, nil
}

// FileStatArgs are file_stat's arguments.
type FileStatArgs struct {
	VaultArg
	Path   string `json:"path" jsonschema:"the file to describe"`
	Follow bool   `json:"follow,omitempty" jsonschema:"describe a symlink's target instead of the symlink"`
}

// Stat is file_stat's result.
type Stat struct {
	Entry
	Ino   uint64    `json:"ino"`
	Nlink uint32    `json:"nlink"`
	UID   uint32    `json:"uid"`
	GID   uint32    `json:"gid"`
	Atime time.Time `json:"atime"`
	Ctime time.Time `json:"ctime"`
}

func fileStat(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileStatArgs) (out Stat, err error) {
	clean, err := vfs.CleanPath(in.Path)
	if err != nil {
		return out, err
	}
	err = s.view(in.Vault, func(tx *vfs.Tx) error {
		a, err := tx.Resolve(clean, in.Follow)
		if err != nil {
			return err
		}
		e, err := entryOf(tx, clean, a)
		out = Stat{Entry: e, Ino: uint64(a.Ino), Nlink: a.Nlink, UID: a.Uid, GID: a.Gid, Atime: a.Atime.UTC(), Ctime: a.Ctime.UTC()}
		return err
	})
	return out, withPath(err, clean)
}

// FileMoveArgs are file_move's arguments.
type FileMoveArgs struct {
	VaultArg
	From string `json:"from" jsonschema:"the file or directory to move"`
	To   string `json:"to" jsonschema:"its new path, or a directory to move it into"`
}

// Moved is file_move's result.
type Moved struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func fileMove(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileMoveArgs) (out Moved, err error) {
	src, err := vfs.CleanPath(in.From)
	if err != nil {
		return out, err
	}
	err = s.update(in.Vault, func(tx *vfs.Tx) error {
		to, err := tx.Move(src, in.To)
		out = Moved{From: src, To: to}
		return err
	})
	return out, withPath(err, src)
}

// FileDeleteArgs are file_delete's arguments.
type FileDeleteArgs struct {
	VaultArg
	Path      string `json:"path" jsonschema:"the file, symlink or directory to remove"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"remove a directory and everything below it"`
	Force     bool   `json:"force,omitempty" jsonschema:"a missing path is not an error"`
}

func fileDelete(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileDeleteArgs) (out vfs.Removed, err error) {
	err = s.update(in.Vault, func(tx *vfs.Tx) error {
		out, err = tx.Remove(in.Path, in.Recursive, in.Force)
		return err
	})
	return out, err
}

// FileSearchArgs are file_search's arguments.
type FileSearchArgs struct {
	VaultArg
	Pattern    string `json:"pattern" jsonschema:"a regular expression (RE2 syntax), or the exact text with fixed"`
	Path       string `json:"path,omitempty" jsonschema:"the file or directory to search (default /)"`
	Fixed      bool   `json:"fixed,omitempty" jsonschema:"pattern is exact text, not a regular expression"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters of either case"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"stop after this many matching lines (default 200)"`
}

// SearchResult is file_search's result.
type SearchResult struct {
	Matches   []vfs.Match `json:"matches"`
	Truncated bool        `json:"truncated"` // max_results stopped the search
}

func fileSearch(s *server, _ context.Context, _ *mcp.CallToolRequest, in FileSearchArgs) (out SearchResult, err error) {
	expr := in.Pattern
	if in.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil || in.Pattern == "" {
		return out, errs.New(errs.InvalidInput, "search", "pattern is not a regular expression: %q", in.Pattern)
	}
	if in.MaxResults < 0 {
		return out, errs.New(errs.InvalidInput, "search", "max_results must be positive, not %d", in.MaxResults)
	}
	if in.MaxResults == 0 {
		in.MaxResults = 200
	}
	if in.Path == "" {
		in.Path = "/"
	}
	err = s.view(in.Vault, func(tx *vfs.Tx) error {
		out.Matches, out.Truncated, err = tx.Search(in.Path, re, in.MaxResults)
		return err
	})
	return out, err
}
