package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/proxy"
)

// ExecArgs are exec's arguments: those of `avfs proxy exec`.
type ExecArgs struct {
	VaultArg
	Argv       []string `json:"argv,omitempty" jsonschema:"the program and its arguments (give argv or shell)"`
	Shell      string   `json:"shell,omitempty" jsonschema:"a script for /bin/sh -c, classified as a whole (give argv or shell)"`
	Cwd        string   `json:"cwd,omitempty" jsonschema:"the working directory inside the vault (default /)"`
	Timeout    string   `json:"timeout,omitempty" jsonschema:"stop the command after this long, a duration such as 30s or 5m (default 5m; 0 is no limit)"`
	Env        []string `json:"env,omitempty" jsonschema:"entries of the form KEY=VALUE added to the command's environment"`
	Stdin      string   `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input (default: none)"`
	ReadOnly   bool     `json:"readonly,omitempty" jsonschema:"run on a read-only mount: no checkpoint, no changes"`
	Checkpoint string   `json:"checkpoint,omitempty" jsonschema:"keep the pre-run checkpoint: auto (default), always or never"`
	MaxOutput  int64    `json:"max_output,omitempty" jsonschema:"bytes of stdout and of stderr kept in the envelope (default 1 MiB)"`
	Approval   string   `json:"approval,omitempty" jsonschema:"run the request a person approved under this id (avfs proxy approve ID)"`
	Isolate    string   `json:"isolate,omitempty" jsonschema:"kernel isolation of the command: auto (default), on or off"`
	Transport  string   `json:"transport,omitempty" jsonschema:"the run's workspace: auto (default: overlay where the kernel allows it, else fuse), fuse or overlay"`
	Changes    string   `json:"changes,omitempty" jsonschema:"how much of the change list the result carries: full (default; up to 10000 changes, then changes_truncated), summary (result.summary only: counts and bytes) or none (no diff is taken)"`
}

// execTool runs a command through the proxy. Its result is the envelope
// of the run (docs/schema/proxy-exec.json), a denied run and one awaiting
// approval included; a run that failed, or a request refused before it
// was recorded, is a tool error.
func execTool(s *server, ctx context.Context, req *mcp.CallToolRequest, in ExecArgs) (*proxy.Envelope, error) {
	vault, err := s.vault(in.Vault)
	if err != nil {
		return nil, err
	}
	r := proxy.Request{Vault: vault, Argv: in.Argv, Shell: in.Shell, Cwd: in.Cwd, Env: in.Env,
		Readonly: in.ReadOnly, Checkpoint: in.Checkpoint, MaxOutput: in.MaxOutput, Approval: in.Approval, Isolate: in.Isolate,
		Changes: in.Changes, Transport: in.Transport, Timeout: proxy.DefaultTimeout, Grace: proxy.DefaultGrace, Linger: s.cfg.Linger}
	if len(in.Argv) > 0 && in.Shell != "" {
		return nil, errs.New(errs.InvalidInput, "proxy exec", "give argv or shell, not both")
	}
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d < 0 {
			return nil, errs.New(errs.InvalidInput, "proxy exec", "timeout wants a duration such as 30s, 5m or 0, not %q", in.Timeout)
		}
		r.Timeout = d
	}
	if in.MaxOutput < 0 {
		return nil, errs.New(errs.InvalidInput, "proxy exec", "max_output must be a positive number of bytes, not %d", in.MaxOutput)
	}
	if in.Stdin != "" {
		r.Stdin = strings.NewReader(in.Stdin)
	}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		p := &progress{ctx: ctx, session: req.Session, token: token}
		r.Stdout, r.Stderr = p.stream("stdout"), p.stream("stderr")
	}
	rt, err := s.cfg.Runtime(vault)
	if err != nil {
		return nil, err
	}
	env, err := rt.Exec(ctx, r)
	if env == nil || env.Result.State == proxy.StateFailed {
		if err == nil {
			err = &errs.Error{Kind: errs.IoError, Op: "proxy exec", Err: fmt.Errorf("run failed")}
		}
		return nil, err
	}
	return env, nil
}

// progress sends a run's output to the client as progress notifications
// while it runs: each notification's message is a piece of output, its
// _meta.stream says which stream, and progress counts the bytes so far.
type progress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	mu      sync.Mutex
	sent    int64
}

// stream is the writer of one stream's output.
func (p *progress) stream(name string) writerFunc {
	var chunks proxy.TextChunks
	return func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		data := chunks.Next(b)
		if len(data) == 0 {
			return len(b), nil
		}
		p.sent += int64(len(data))
		err := p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
			ProgressToken: p.token, Progress: float64(p.sent), Message: string(data),
			Meta: mcp.Meta{"stream": name},
		})
		return len(b), err
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
