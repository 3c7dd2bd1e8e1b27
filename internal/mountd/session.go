// Package mountd is the serving process of a mount and the one place
// that talks to it: Start runs it and waits for its readiness report
// (start.go), Call speaks its typed control protocol (control.go), and
// Unmount ends it (unmount.go). It serves a FUSE mount (Session) or
// another transport's workspace (ServeWorkspace, workspace.go). The filesystem it serves is package
// fusefs; what it leaves on disk is package mountrec.
//
// A Session is one mount, driven as an explicit state machine:
//
//	validating → mounting → mounted → unmounting → unmounted
//	      ╰──────────┴────────────────────┴──────→ failed
//
// While a session is mounted read-write it holds the vault's writer lock
// and a record under $AVFS_HOME/mounts/ (package mountrec) that
// `avfs mounts` lists. The CLI serves a session from its own process
// (`avfs mount --foreground`), never from the one that runs the user's
// command.
package mountd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/fusefs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// State is where a Session is in its life.
type State int

// The states of a Session.
const (
	Validating State = iota
	Mounting
	Mounted
	Unmounting
	Unmounted
	Failed
)

func (s State) String() string {
	return [...]string{"validating", "mounting", "mounted", "unmounting", "unmounted", "failed"}[s]
}

// Kinds of failure the mount adds to package errs. Like those they are
// part of the JSON contract: added to, never renamed.
const (
	// NotMounted is an unmount of a directory that holds no avfs mount.
	NotMounted errs.Kind = "NotMounted"
	// MountBusy is an unmount refused because files in the mount are in
	// use.
	MountBusy errs.Kind = "MountBusy"
	// MountFailed is a mount the kernel or the serving process refused.
	MountFailed errs.Kind = "MountFailed"
)

// Options describe one mount.
type Options struct {
	Home       *registry.Home
	Vault      string
	Mountpoint string
	ReadOnly   bool
	// Log receives the mount's diagnostics (unexpected vault errors);
	// nil discards them.
	Log io.Writer
	// Debug logs every FUSE request to Log.
	Debug bool
	// WriteBudget bounds the memory holding written data not yet in the
	// vault (64 MiB when zero).
	WriteBudget int64
	// Control are ops a read-write mount answers on its control socket
	// (control.go), beside the built-in "flush" and "release".
	Control map[string]ControlFunc
	// IdleTimeout, when positive, ends the mount once it has served no
	// request for that long and nothing holds it (idle.go).
	IdleTimeout time.Duration
	// NoGC turns off the background garbage collection (gc.go): the
	// benchmark's baseline for what it costs.
	NoGC bool
}

// Session is one mount of a vault.
type Session struct {
	opts Options

	mu     sync.Mutex
	state  State
	err    error // why it failed
	v      *vfs.Vault
	server *fuse.Server
	fs     *fusefs.FS
	ctl    *controlServer
	lock   *mountrec.WriterLock
	rec    *mountrec.Record
	done   chan struct{} // closed once the session is unmounted or failed
	// leaving lets go of the vault's run lock, held by an idle mount
	// from the moment it decides to end until it is released.
	leaving func()
}

// New returns a session in state Validating. Nothing happens until Mount.
func New(opts Options) *Session {
	return &Session{opts: opts, state: Validating, done: make(chan struct{})}
}

// State is the session's current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Mountpoint is the absolute, clean directory the session mounts on (once
// Mount has validated it).
func (s *Session) Mountpoint() string { return s.opts.Mountpoint }

// Vault is the mounted vault (nil before Mount succeeds).
func (s *Session) Vault() *vfs.Vault { return s.v }

func (s *Session) set(to State) {
	s.mu.Lock()
	s.state = to
	s.mu.Unlock()
}

// fail releases whatever the session holds and records err.
func (s *Session) fail(err error) error {
	s.release()
	s.mu.Lock()
	s.state, s.err = Failed, err
	s.mu.Unlock()
	close(s.done)
	return err
}

// Mount validates the options, takes the vault's locks, opens the vault and
// mounts it; when it returns nil the mountpoint serves the vault (the
// kernel has answered the mount's first request). It may be called once.
func (s *Session) Mount() error {
	s.mu.Lock()
	if s.state != Validating {
		st := s.state
		s.mu.Unlock()
		return &errs.Error{Kind: errs.InvalidInput, Op: "mount", Err: fmt.Errorf("session is %s, not validating", st)}
	}
	s.mu.Unlock()
	if err := s.validate(); err != nil {
		return s.fail(err)
	}
	s.set(Mounting)
	if err := s.mount(); err != nil {
		return s.fail(err)
	}
	s.set(Mounted)
	go s.serve()
	if s.opts.IdleTimeout > 0 {
		go s.endWhenIdle()
	}
	return nil
}

func (s *Session) validate() error {
	o := &s.opts
	if o.Home == nil {
		return errs.New(errs.InvalidInput, "mount", "no avfs home")
	}
	if err := registry.CheckName(o.Vault); err != nil {
		return err
	}
	mnt, err := CleanMountpoint(o.Mountpoint)
	if err != nil {
		return err
	}
	o.Mountpoint = mnt
	return CheckMountpoint(mnt)
}

// CheckMountpoint says whether the clean directory mnt may be mounted
// on: it exists, is a directory, and nothing is mounted there.
func CheckMountpoint(mnt string) error {
	fi, err := os.Stat(mnt)
	if err != nil {
		return &errs.Error{Kind: errs.NotFound, Op: "mount", Path: mnt, Err: err, Hint: "create the directory first"}
	}
	if !fi.IsDir() {
		return &errs.Error{Kind: errs.NotADirectory, Op: "mount", Path: mnt, Err: errors.New("mountpoint is not a directory")}
	}
	if mountrec.IsMountpoint(mnt) {
		return &errs.Error{Kind: errs.AlreadyExists, Op: "mount", Path: mnt, Err: errors.New("something is already mounted there"),
			Hint: "unmount it first (`avfs unmount " + mnt + "`)"}
	}
	return nil
}

// CleanMountpoint is the absolute path of dir with symlinks resolved, as
// the kernel's mount table names it.
func CleanMountpoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &errs.Error{Kind: errs.InvalidPath, Op: "mount", Path: dir, Err: err}
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs, nil
}

func (s *Session) mount() error {
	o := s.opts
	var err error
	if !o.ReadOnly {
		if s.lock, err = mountrec.LockWriter(o.Home, o.Vault, o.Mountpoint); err != nil {
			return err
		}
	}
	if s.rec, err = mountrec.Create(o.Home, mountrec.Info{Vault: o.Vault, Mountpoint: o.Mountpoint,
		PID: os.Getpid(), ReadOnly: o.ReadOnly, StartedAt: time.Now().UTC(),
		IdleTimeoutMS: o.IdleTimeout.Milliseconds(), Transport: mountrec.FUSE}); err != nil {
		return err
	}
	if s.v, err = o.Home.OpenFor(o.Vault, !o.ReadOnly); err != nil {
		return err
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	logger := log.New(logw, "avfs mount: ", log.LstdFlags)
	if s.fs, err = fusefs.New(s.v, fusefs.Options{ReadOnly: o.ReadOnly, Name: o.Vault,
		HostDir: filepath.Dir(o.Home.Path(o.Vault)), Logger: logger, Debug: o.Debug,
		WriteBudget: o.WriteBudget, NoGC: o.NoGC}); err != nil {
		return err
	}
	server, err := s.fs.Serve(o.Mountpoint)
	if err != nil {
		return &errs.Error{Kind: MountFailed, Op: "mount", Path: o.Mountpoint, Vault: o.Vault, Err: err,
			Hint: "mounting needs root (or CAP_SYS_ADMIN) and /dev/fuse"}
	}
	s.server = server
	if !mountrec.IsMountpoint(o.Mountpoint) {
		_ = server.Unmount()
		return &errs.Error{Kind: MountFailed, Op: "mount", Path: o.Mountpoint, Vault: o.Vault,
			Err: errors.New("the mount did not appear in the mount table")}
	}
	if !o.ReadOnly {
		path, err := mountrec.SocketPath(o.Home, o.Mountpoint)
		if err == nil {
			s.ctl, err = listenControl(path, s.controlOps(), map[string]plainFunc{
				"release": func(json.RawMessage) (any, error) { return nil, s.releaseOp() },
			}, s.fs.Exclusive)
		}
		if err != nil {
			_ = server.Unmount()
			return &errs.Error{Kind: MountFailed, Op: "mount", Path: o.Mountpoint, Vault: o.Vault,
				Err: fmt.Errorf("control socket: %w", err)}
		}
	}
	return nil
}

// controlOps are the ops of the control socket: the options' and "flush",
// which persists everything the mount holds (and with {"sync": true}
// makes it durable).
func (s *Session) controlOps() map[string]ControlFunc {
	ops := map[string]ControlFunc{}
	for name, fn := range s.opts.Control {
		ops[name] = fn
	}
	ops["flush"] = func(v *vfs.Vault, args json.RawMessage) (any, error) {
		var a struct {
			Sync bool `json:"sync"`
		}
		if len(args) > 0 {
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
		}
		if a.Sync {
			return nil, v.Sync()
		}
		return nil, nil
	}
	return ops
}

// serve waits for the FUSE loop to end (an unmount, by this session or
// from outside) and releases everything.
func (s *Session) serve() {
	s.server.Wait()
	s.release()
	s.mu.Lock()
	if s.state != Failed {
		s.state = Unmounted
	}
	s.mu.Unlock()
	close(s.done)
}

// release persists the buffered writes, closes the vault, then gives up
// the writer lock and the record, in that order: `avfs unmount` waits for
// the record's lock, so once it returns the vault holds everything, is
// closed, and is writable by others.
func (s *Session) release() {
	if s.ctl != nil {
		s.ctl.close()
	}
	if s.fs != nil {
		if err := s.fs.Close(); err != nil && s.opts.Log != nil {
			fmt.Fprintf(s.opts.Log, "avfs mount: %v\n", err)
		}
	}
	if s.v != nil {
		if err := s.v.Close(); err != nil && s.opts.Log != nil {
			fmt.Fprintf(s.opts.Log, "avfs mount: closing vault: %v\n", err)
		}
	}
	if s.lock != nil {
		s.lock.Release()
	}
	if s.rec != nil {
		s.rec.Remove()
	}
	s.mu.Lock()
	leaving := s.leaving
	s.mu.Unlock()
	if leaving != nil {
		leaving()
	}
}

// Unmount unmounts the session and waits until it is released. lazy
// detaches the mount even while files in it are in use (MNT_DETACH); the
// session then ends when the last of them is closed. Unmounting a session
// that is unmounting or unmounted waits for it and returns nil; one that
// never mounted is an error.
func (s *Session) Unmount(lazy bool) error {
	if err := s.beginUnmount(lazy); err != nil {
		return err
	}
	<-s.done
	return nil
}

// beginUnmount unmounts without waiting for the release that follows. A
// session already unmounting is not an error.
func (s *Session) beginUnmount(lazy bool) error {
	s.mu.Lock()
	switch s.state {
	case Validating, Mounting:
		s.mu.Unlock()
		return &errs.Error{Kind: NotMounted, Op: "unmount", Path: s.opts.Mountpoint, Err: errors.New("not mounted yet")}
	case Failed:
		err := s.err
		s.mu.Unlock()
		return err
	case Unmounting, Unmounted:
		s.mu.Unlock()
		return nil
	}
	s.state = Unmounting
	s.mu.Unlock()
	if err := unmount(s.opts.Mountpoint, lazy); err != nil {
		s.mu.Lock()
		if s.state == Unmounting {
			s.state = Mounted
		}
		s.mu.Unlock()
		return err
	}
	return nil
}

// Wait blocks until the session is unmounted (by Unmount or from outside)
// and returns the failure, if it failed.
func (s *Session) Wait() error {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.done }
