// Package mcpserver is `avfs mcp`: a Model Context Protocol server whose
// tools are the vaults, checkpoints, files and proxy runs of one avfs home.
// Every tool calls the same model code as the command line and the Go
// library (internal/registry, internal/vfs, internal/proxy); this package
// adds only the tools' typed arguments, their JSON Schemas and
// annotations, and the mapping of errors to MCP tool errors that carry
// the command line's error document (docs/schema/error.json).
//
// A tool call can never approve a run: exec runs a command through the
// policy exactly as `avfs proxy exec` does, and a run that needs approval
// comes back awaiting it, with the id a person passes to `avfs proxy
// approve`.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// Config is what a server serves and how.
type Config struct {
	// Home is the avfs home, its write guard and its BeforeOpen set as the
	// command line sets them.
	Home *registry.Home
	// Runtime is the proxy runtime for runs on vault: the one `avfs proxy
	// exec` uses, whose mounts are served by their own avfs process.
	Runtime func(vault string) (*proxy.Runtime, error)
	// ErrorDocument is the command line's error document of err.
	ErrorDocument func(err error) map[string]any
	// Vault pins the server to one vault: vault arguments may be left
	// out, any other vault is refused, and the tools that make vaults
	// are not offered.
	Vault string
	// Tools limits the tools offered to these names; nil offers all.
	Tools []string
	// ReadOnly offers only the tools that change nothing.
	ReadOnly bool
	// Linger is how long a mount an exec starts stays for the next run
	// when the call does not say (proxy.LingerFrom($AVFS_PROXY_LINGER)).
	Linger time.Duration
	// Version is the server's version, as `avfs version` prints it.
	Version string
}

// server is one configured server's state.
type server struct {
	cfg Config
}

// tool is one row of the tool table.
type tool struct {
	name, title, desc string
	readOnly          bool
	destructive       bool
	idempotent        bool
	openWorld         bool
	// makesVaults marks the tools a pinned server does not offer.
	makesVaults bool
	add         func(*server, *mcp.Server, *mcp.Tool)
}

// ToolNames lists every tool a server can offer, in the table's order.
func ToolNames() []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.name)
	}
	return out
}

// Offered lists the tools a server of cfg offers.
func Offered(cfg Config) []string {
	s := &server{cfg: cfg}
	out := []string{}
	for _, t := range tools {
		if s.offers(t) {
			out = append(out, t.name)
		}
	}
	return out
}

// New builds the server. An unknown name in cfg.Tools, or a pinned vault
// whose name is not valid, is InvalidInput.
func New(cfg Config) (*mcp.Server, error) {
	if cfg.Vault != "" {
		if err := registry.CheckName(cfg.Vault); err != nil {
			return nil, err
		}
	}
	names := ToolNames()
	for _, n := range cfg.Tools {
		if !slices.Contains(names, n) {
			return nil, &errs.Error{Kind: errs.InvalidInput, Op: "mcp", Err: fmt.Errorf("no tool named %q", n),
				Hint: "tools are " + strings.Join(names, ", ")}
		}
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &server{cfg: cfg}
	srv := mcp.NewServer(&mcp.Implementation{Name: "avfs", Title: "avfs workspaces", Version: cfg.Version},
		&mcp.ServerOptions{Instructions: instructions(cfg)})
	srv.AddReceivingMiddleware(s.typedErrors)
	for _, t := range tools {
		if !s.offers(t) {
			continue
		}
		open, destructive := t.openWorld, t.destructive
		mt := &mcp.Tool{Name: t.name, Title: t.title, Description: t.desc, Annotations: &mcp.ToolAnnotations{
			Title: t.title, ReadOnlyHint: t.readOnly, DestructiveHint: &destructive, IdempotentHint: t.idempotent || t.readOnly,
			OpenWorldHint: &open,
		}}
		t.add(s, srv, mt)
	}
	return srv, nil
}

func (s *server) offers(t tool) bool {
	switch {
	case s.cfg.Tools != nil && !slices.Contains(s.cfg.Tools, t.name):
		return false
	case s.cfg.ReadOnly && !t.readOnly:
		return false
	case s.cfg.Vault != "" && t.makesVaults:
		return false
	}
	return true
}

func instructions(cfg Config) string {
	b := "avfs keeps a workspace in a vault: a whole filesystem in one file, with O(1) forks and checkpoints. " +
		"Read and change its files with the file_* tools, save a checkpoint before risky work, and run commands " +
		"with exec, which classifies them by policy, checkpoints and reports every path they changed; undo takes a run back. " +
		"Errors are JSON documents {error, message, ...}."
	if cfg.Vault != "" {
		b += " This server serves vault " + cfg.Vault + " only; vault arguments may be left out."
	}
	return b
}

// vault is the vault a call works on: its argument, else the pinned
// vault, else the home's current one. A pinned server refuses others.
func (s *server) vault(arg string) (string, error) {
	if pin := s.cfg.Vault; pin != "" {
		if arg != "" && arg != pin {
			return "", &errs.Error{Kind: errs.PermissionDenied, Op: "mcp", Vault: arg,
				Err: fmt.Errorf("this server serves vault %q only", pin)}
		}
		return pin, nil
	}
	if arg == "" {
		return s.cfg.Home.Current()
	}
	return arg, registry.CheckName(arg)
}

// toolError is a failed call: its text is the error document, so a client
// reads {error, message, ...} from the result's content.
type toolError struct {
	err error
	doc []byte
}

func (e *toolError) Error() string { return string(e.doc) }
func (e *toolError) Unwrap() error { return e.err }

func (s *server) toolError(err error) error {
	var doc map[string]any
	if s.cfg.ErrorDocument != nil {
		doc = s.cfg.ErrorDocument(err)
	} else {
		doc = map[string]any{"error": string(errs.KindOf(err)), "message": err.Error()}
	}
	b, merr := json.Marshal(doc)
	if merr != nil {
		b = []byte(fmt.Sprintf(`{"error":"IoError","message":%q}`, err.Error()))
	}
	return &toolError{err: err, doc: b}
}

// typedErrors makes the tool errors the SDK raises itself, before a tool
// runs (arguments that do not follow the tool's schema), InvalidInput
// error documents like every other tool error.
func (s *server) typedErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || !r.IsError {
			return res, err
		}
		var te *toolError
		if errors.As(r.GetError(), &te) {
			return res, nil
		}
		msg := "the arguments do not follow the tool's input schema"
		if e := r.GetError(); e != nil {
			msg = e.Error()
		}
		doc := s.toolError(&errs.Error{Kind: errs.InvalidInput, Op: "mcp", Err: errors.New(msg)})
		r.Content = []mcp.Content{&mcp.TextContent{Text: doc.Error()}}
		return r, nil
	}
}

// handle adapts a typed tool body: its result is the structured content,
// its error a tool error carrying the error document.
func handle[In, Out any](fn func(s *server, ctx context.Context, req *mcp.CallToolRequest, in In) (Out, error)) func(*server, *mcp.Server, *mcp.Tool) {
	return func(s *server, srv *mcp.Server, t *mcp.Tool) {
		mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
			out, err := fn(s, ctx, req, in)
			if err != nil {
				var zero Out
				return nil, zero, s.toolError(err)
			}
			return nil, out, nil
		})
	}
}

// tools is the tool table.
var tools = []tool{
	{name: "vault_list", title: "List vaults", readOnly: true,
		desc: "List the vaults of the avfs home (only the pinned one on a pinned server).",
		add:  handle(vaultList)},
	{name: "vault_create", title: "Create a vault", makesVaults: true,
		desc: "Create a new, empty vault. Names are 1-64 characters of A-Z a-z 0-9 _ -.",
		add:  handle(vaultCreate)},
	{name: "vault_fork", title: "Fork a vault", makesVaults: true,
		desc: "Fork a vault into a new one in O(1): the fork starts as the source's working state and goes its own way.",
		add:  handle(vaultFork)},
	{name: "checkpoint_save", title: "Save a checkpoint",
		desc: "Freeze the vault's working state as a named checkpoint, in O(1) (a name is generated when left out).",
		add:  handle(checkpointSave)},
	{name: "checkpoint_list", title: "List checkpoints", readOnly: true,
		desc: "List the vault's checkpoints, oldest first.",
		add:  handle(checkpointList)},
	{name: "checkpoint_restore", title: "Restore a checkpoint", destructive: true, idempotent: true,
		desc: "Make a checkpoint the working state again, in O(1). Unsaved changes are discarded; every checkpoint stays.",
		add:  handle(checkpointRestore)},
	{name: "diff", title: "Diff two states", readOnly: true,
		desc: "List the paths that differ between two states of the vault: from a checkpoint (default: the latest) to another or to the working state (default). A file moved (with or without edits) is one change of kind renamed, from its old path. With patch, also the git-format patch of it all (as avfs diff --patch); with stat, git's stat lines.",
		add:  handle(diff)},
	{name: "undo", title: "Undo a run", destructive: true,
		desc: "Return the vault to the state just before an exec run (default: its latest run that kept a checkpoint); later runs are undone with it.",
		add:  handle(undo)},
	{name: "redo", title: "Redo an undone run", destructive: true,
		desc: "Re-apply an exec run that undo took back (default: the run the last undo went back before): the state it left becomes the working state again. The vault must not have changed since the undo (Conflict otherwise; nothing changes).",
		add:  handle(redo)},
	{name: "exec", title: "Run a command", destructive: true, openWorld: true,
		desc: "Run one command in the vault through the policy, exactly as `avfs proxy exec`: a denied command touches nothing; " +
			"one that needs approval comes back in state awaiting_approval with its approval id, which a person approves " +
			"with `avfs proxy approve ID` before exec runs it with approval=ID. Otherwise a checkpoint is saved, the command runs " +
			"in a mount of the vault and the result is the run's envelope: exit code, output, changed paths. Output is streamed " +
			"as progress notifications when the call has a progress token.",
		add: handle(execTool)},
	{name: "file_read", title: "Read a file", readOnly: true,
		desc: "Read a file of the vault: all of it, its first or last lines; content that is not UTF-8 text comes base64-encoded.",
		add:  handle(fileRead)},
	{name: "file_write", title: "Write a file", destructive: true, idempotent: true,
		desc: "Create or replace a file of the vault with the given content, in one transaction.",
		add:  handle(fileWrite)},
	{name: "file_edit", title: "Edit a file", destructive: true,
		desc: "Apply exact search and replace edits to a file, in order; an edit whose text is missing or not unique changes nothing. dry_run shows the result without writing it.",
		add:  handle(fileEdit)},
	{name: "file_list", title: "List a directory", readOnly: true,
		desc: "List a directory of the vault, or with recursive the whole tree below it.",
		add:  handle(fileList)},
	{name: "file_stat", title: "Describe a file", readOnly: true,
		desc: "Describe a file of the vault: type, size, mode, times; a symlink itself unless follow.",
		add:  handle(fileStat)},
	{name: "file_move", title: "Move a file", destructive: true,
		desc: "Move or rename a file or directory of the vault, or into a directory; an existing file at the destination is replaced.",
		add:  handle(fileMove)},
	{name: "file_delete", title: "Delete a file", destructive: true, idempotent: true,
		desc: "Remove a file, a symlink, or with recursive a directory and everything below it, in one transaction.",
		add:  handle(fileDelete)},
	{name: "file_search", title: "Search files", readOnly: true,
		desc: "Grep the text files at and below a path of the vault for lines matching a regular expression (RE2), without a mount.",
		add:  handle(fileSearch)},
}
