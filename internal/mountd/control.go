package mountd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The control socket. While a vault is mounted read-write, its serving
// process is the vault's only writer and holds it open with warm caches,
// so work that must see every write made through the mount (a proxy run's
// checkpoint and change summary) is asked of it rather than done by
// opening the vault beside it: no second open, no fsync to push the
// write-back out, and no wait for the server's open batch.
//
// The socket is $AVFS_HOME/mounts/<key>.sock, mode 0600 in a 0700
// directory. A request is one JSON line {"op","args"}; the reply is one
// JSON line {"result"} or {"error"}. Each op runs with the mount's
// write-back persisted and its batch committed, while no other change is
// made (ControlFunc).

// ControlFunc is an op the serving process runs for a client. It has the
// vault to itself: every write made through the mount is in it, and no
// FUSE change runs until it returns. args is the request's raw arguments.
type ControlFunc func(v *vfs.Vault, args json.RawMessage) (any, error)

// ErrNoControl means the mount has no control socket to answer (a
// read-only mount, or a server from an older avfs); callers fall back to
// opening the vault.
var ErrNoControl = errors.New("the mount has no control socket")

type controlRequest struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

type controlReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// plainFunc is a built-in op that runs beside the mount's work rather
// than with the vault to itself ("release", which unmounts).
type plainFunc func(args json.RawMessage) (any, error)

// controlServer answers requests on the socket until closed.
type controlServer struct {
	l     net.Listener
	path  string
	ops   map[string]ControlFunc
	plain map[string]plainFunc
	run   func(fn func(v *vfs.Vault) error) error // runs fn with the vault to itself
	wg    sync.WaitGroup
}

func listenControl(path string, ops map[string]ControlFunc, plain map[string]plainFunc, run func(func(*vfs.Vault) error) error) (*controlServer, error) {
	_ = os.Remove(path) // a dead server's socket: the record lock says none is live
	l, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	cs := &controlServer{l: l, path: path, ops: ops, plain: plain, run: run}
	cs.wg.Add(1)
	go cs.accept()
	return cs, nil
}

func (cs *controlServer) accept() {
	defer cs.wg.Done()
	for {
		c, err := cs.l.Accept()
		if err != nil {
			return // closed
		}
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			cs.serve(c)
		}()
	}
}

// serve answers the requests of one connection, one line each.
func (cs *controlServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req controlRequest
		var reply controlReply
		if err := json.Unmarshal(line, &req); err != nil {
			reply.Error = toWire(errs.New(errs.InvalidInput, "", "bad control request: %v", err))
		} else if fn, ok := cs.plain[req.Op]; ok {
			res, err := fn(req.Args)
			if err == nil {
				reply.Result, err = json.Marshal(res)
			}
			if err != nil {
				reply.Error = toWire(err)
			}
		} else if fn, ok := cs.ops[req.Op]; !ok {
			reply.Error = toWire(errs.New(errs.InvalidInput, "", "unknown control op %q", req.Op))
		} else {
			var res any
			err := cs.run(func(v *vfs.Vault) (err error) {
				res, err = fn(v, req.Args)
				return err
			})
			if err == nil {
				reply.Result, err = json.Marshal(res)
			}
			if err != nil {
				reply.Error = toWire(err)
			}
		}
		if enc.Encode(reply) != nil {
			return
		}
	}
}

// close stops answering and waits for requests in progress.
func (cs *controlServer) close() {
	cs.l.Close()
	cs.wg.Wait()
	_ = os.Remove(cs.path)
}

// Call asks the server of the mount at mountpoint to run op with args and
// decodes its result into result (which may be nil). A mount without a
// control socket gives an error wrapping ErrNoControl; an op that failed
// in the server gives its typed error.
func Call(h *registry.Home, mountpoint, op string, args, result any) error {
	path, err := mountrec.SocketPath(h, mountpoint)
	if err != nil {
		return err
	}
	c, err := dialUnix(path, 2*time.Second)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoControl, err)
	}
	defer c.Close()
	// Ops are short (a checkpoint, a diff); a server that does not answer
	// within this is stuck, and the caller must not wait for it forever.
	_ = c.SetDeadline(time.Now().Add(callTimeout))
	req := controlRequest{Op: op}
	if args != nil {
		if req.Args, err = json.Marshal(args); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: op, Path: mountpoint, Err: fmt.Errorf("control socket: %w", err)}
	}
	var reply controlReply
	if err := json.NewDecoder(c).Decode(&reply); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: op, Path: mountpoint, Err: fmt.Errorf("control socket: %w", err)}
	}
	if reply.Error != nil {
		return reply.Error.err()
	}
	if result != nil && len(reply.Result) > 0 {
		return json.Unmarshal(reply.Result, result)
	}
	return nil
}

// callTimeout bounds one control request.
const callTimeout = 10 * time.Minute

// maxSocketPath is the longest path a unix socket address holds.
const maxSocketPath = 100

// listenUnix listens on a socket at path. A path too long for a socket
// address is reached through /proc/self/fd and its directory.
func listenUnix(path string) (net.Listener, error) {
	var l net.Listener
	err := viaShortPath(path, func(p string) (err error) {
		l, err = net.Listen("unix", p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func dialUnix(path string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := viaShortPath(path, func(p string) (err error) {
		c, err = net.DialTimeout("unix", p, timeout)
		return err
	})
	return c, err
}

// viaShortPath calls fn with path, or with a /proc/self/fd name of the
// same file when path is too long for a socket address.
func viaShortPath(path string, fn func(string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)))
}
