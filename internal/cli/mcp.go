package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mcpserver"
	"github.com/agentvfs/agentvfs/internal/proxy"
)

// mcpServing is what `avfs mcp --http --json` prints once it listens.
type mcpServing struct {
	Transport string   `json:"transport"` // "http"
	URL       string   `json:"url"`
	TokenFile string   `json:"token_file"`
	Vault     *string  `json:"vault"` // the pinned vault
	Tools     []string `json:"tools"` // the tools offered
}

func (r mcpServing) human(w io.Writer) {
	fmt.Fprintf(w, "serving MCP at %s (bearer token in %s)\n", r.URL, r.TokenFile)
}

func (a *app) mcpCmd() *cobra.Command {
	var tools []string
	var readonly, listen bool
	var addr string
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the vaults as a Model Context Protocol server (stdio, or HTTP with --http)",
		Long: `Serve this home's vaults to an MCP client: vault_list, vault_create,
vault_fork, checkpoint_save, checkpoint_list, checkpoint_restore, diff, undo,
exec (a command through the policy, as proxy exec; its output streams as
progress notifications), file_read, file_write, file_edit, file_list,
file_stat, file_move, file_delete and file_search. Errors are tool errors
whose text is the same {error, message, ...} document --json prints.

The transport is stdio: the client starts avfs mcp and speaks JSON-RPC on
its stdin and stdout. --http HOST:PORT serves streamable HTTP instead, on a
loopback address unless --listen is given, to requests bearing the token
in $AVFS_HOME/mcp/token (created 0600 on first use); --http with --json
prints where it listens once it does (port 0 picks a free port).

--vault NAME pins the server to one vault: vault arguments may be left out,
others are refused, vault_create and vault_fork are not offered. --tools
offers only the tools named; --readonly only those that change nothing.
A tool call never approves a run: a command that needs approval comes back
awaiting it, and a person runs ` + "`avfs proxy approve ID`" + `.`,
		Args: noArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) (any, error) {
			if cmd.Flags().Changed("listen") && addr == "" {
				return nil, usageErrorf("--listen goes with --http")
			}
			h, err := a.home()
			if err != nil {
				return nil, err
			}
			linger, err := proxy.LingerFrom(a.env.Getenv("AVFS_PROXY_LINGER"))
			if err != nil {
				return nil, err
			}
			if !cmd.Flags().Changed("tools") {
				tools = nil
			}
			cfg := mcpserver.Config{
				Home: h, Vault: a.vaultFlag, Tools: tools, ReadOnly: readonly, Linger: linger, Version: Version(),
				Runtime:       func(vault string) (*proxy.Runtime, error) { return a.proxyRuntime(h, vault) },
				ErrorDocument: func(err error) map[string]any { doc, _ := ErrorDocument(err); return doc },
			}
			srv, err := mcpserver.New(cfg)
			if err != nil {
				return nil, err
			}
			if addr == "" {
				t := &mcp.IOTransport{Reader: io.NopCloser(a.env.Stdin), Writer: nopWriteCloser{a.env.Stdout}}
				if err := srv.Run(a.ctx, t); err != nil && a.ctx.Err() == nil && !isClosed(err) {
					return nil, &errs.Error{Kind: errs.IoError, Op: "mcp", Err: err}
				}
				return nil, nil
			}
			if err := mcpserver.CheckAddr(addr, listen); err != nil {
				return nil, err
			}
			tokenFile, token, err := mcpserver.Token(h.Dir)
			if err != nil {
				return nil, err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, &errs.Error{Kind: errs.IoError, Op: "mcp", Err: err}
			}
			r := mcpServing{Transport: "http", URL: "http://" + ln.Addr().String() + "/mcp", TokenFile: tokenFile, Tools: mcpserver.Offered(cfg)}
			if cfg.Vault != "" {
				r.Vault = &cfg.Vault
			}
			if a.jsonOut {
				a.emit(r)
			} else {
				r.human(a.env.Stderr)
			}
			return nil, mcpserver.ServeHTTP(a.ctx, ln, mcpserver.Handler(srv, token))
		}),
	}
	f := c.Flags()
	f.StringSliceVar(&tools, "tools", nil, "offer only these tools (comma-separated): "+strings.Join(mcpserver.ToolNames(), ", "))
	f.BoolVar(&readonly, "readonly", false, "offer only the tools that change nothing")
	f.StringVar(&addr, "http", "", "serve streamable HTTP on HOST:PORT instead of stdio")
	f.BoolVar(&listen, "listen", false, "with --http, allow an address that is not loopback")
	return c
}

// isClosed reports the end of a stdio session: the client closed its end.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
