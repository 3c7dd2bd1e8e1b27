package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// TokenFile is where a home keeps the bearer token of `avfs mcp --http`,
// relative to the home: readable by its owner only.
const TokenFile = "mcp/token"

// Token returns the home's bearer token, creating it (32 random bytes in
// hex, mode 0600) on first use. A token file that others may read is
// refused (PermissionDenied): whoever reads it can run commands.
func Token(home string) (path, token string, err error) {
	path = filepath.Join(home, TokenFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", "", &errs.Error{Kind: errs.IoError, Op: "mcp", Path: path, Err: err}
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return "", "", &errs.Error{Kind: errs.IoError, Op: "mcp", Err: err}
		}
		tok := hex.EncodeToString(raw)
		// O_EXCL: of two servers starting at once, one makes the token
		// and both use it.
		f, werr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if werr == nil {
			_, werr = f.WriteString(tok + "\n")
			werr = errors.Join(werr, f.Sync(), f.Close())
		}
		if werr != nil && !errors.Is(werr, os.ErrExist) {
			return "", "", &errs.Error{Kind: errs.IoError, Op: "mcp", Path: path, Err: werr}
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", "", &errs.Error{Kind: errs.IoError, Op: "mcp", Path: path, Err: err}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", &errs.Error{Kind: errs.IoError, Op: "mcp", Path: path, Err: err}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", "", &errs.Error{Kind: errs.PermissionDenied, Op: "mcp", Path: path,
			Err:  fmt.Errorf("the token file has mode %04o: others may read it", fi.Mode().Perm()),
			Hint: "chmod 600 it, or delete it for a new token"}
	}
	token = strings.TrimSpace(string(b))
	if len(token) < 32 {
		return "", "", &errs.Error{Kind: errs.InvalidInput, Op: "mcp", Path: path, Err: fmt.Errorf("the token file holds no token"),
			Hint: "delete it for a new token"}
	}
	return path, token, nil
}

// CheckAddr refuses an address to listen on that is not loopback, unless
// listen says the user asked for it: the server runs commands for whoever
// holds the token.
func CheckAddr(addr string, listen bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errs.New(errs.InvalidInput, "mcp", "--http wants HOST:PORT such as 127.0.0.1:8765, not %q", addr)
	}
	if listen {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return &errs.Error{Kind: errs.InvalidInput, Op: "mcp", Err: fmt.Errorf("%s is not a loopback address", addr),
		Hint: "serve on 127.0.0.1, or pass --listen to serve other hosts"}
}

// Handler serves srv over streamable HTTP at every path, to requests that
// carry "Authorization: Bearer TOKEN"; others get 401 and reach nothing.
func Handler(srv *mcp.Server, token string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="avfs"`)
			http.Error(w, `{"error":"PermissionDenied","message":"a bearer token is required: the one in $AVFS_HOME/`+TokenFile+`"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves h on ln until ctx ends, then shuts down.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return &errs.Error{Kind: errs.IoError, Op: "mcp", Err: err}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	}
}
