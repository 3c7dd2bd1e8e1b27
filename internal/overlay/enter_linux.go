//go:build linux

package overlay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// A user that is not root cannot mount an overlay on the host, but can in
// a user namespace of its own, where it holds every capability over a
// mount namespace nobody else sees. Enter runs a command so: avfs is
// re-executed (EnterArg) in a new user and mount namespace whose only
// uid and gid are the caller's own, mapped to themselves, with the
// capabilities a mount needs kept across that exec as ambient ones. The
// helper mounts the stack (fsopen, one lowerdir+ per layer, userxattr),
// checks the working directory inside it, drops every capability and
// execs the command (bubblewrap, for an isolated run), which thus sees
// its real uid. The mount lives only in that namespace: it ends when its
// last process does, and the host ingests the upper dir, a host
// directory, once the command has ended.

// EnterSpec is what the helper does, passed to it as JSON.
type EnterSpec struct {
	Stack  Stack  `json:"stack"`
	Target string `json:"target"` // the mountpoint, an existing dir
	// Cwd is the working directory inside Target as --cwd names it
	// (Workdir checks it there).
	Cwd  string   `json:"cwd,omitempty"`
	Argv []string `json:"argv,omitempty"` // an absolute path first
	// Probe mounts Stack, checks that the whiteout probeStack wrote hides
	// its name, and exits.
	Probe bool `json:"probe,omitempty"`
	// SetupFD is where the helper writes why it failed before the exec
	// (closed by the exec when it succeeds); 0: stderr only.
	SetupFD int `json:"setup_fd,omitempty"`
}

// mountCaps are the capabilities, in the run's own user namespace, the
// helper keeps across its exec for the mount: overlayfs checks the
// mounter's credentials on its layers as well as CAP_SYS_ADMIN.
var mountCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH,
	unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_CHOWN, unix.CAP_MKNOD}

// EnterCommand is the argv that runs spec through the helper exe (the
// avfs binary), and what its SysProcAttr must add: the new namespaces
// and their id maps.
func EnterCommand(exe string, spec EnterSpec) ([]string, func(*syscall.SysProcAttr)) {
	b, _ := json.Marshal(spec)
	uid, gid := os.Geteuid(), os.Getegid()
	attr := func(a *syscall.SysProcAttr) {
		a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
		a.AmbientCaps = mountCaps
	}
	return []string{exe, EnterArg, string(b)}, attr
}

// EnterMain is the helper (args: the JSON EnterSpec). It returns only
// when it fails (125) or after a probe.
func EnterMain(args []string, stderr io.Writer) int {
	var spec EnterSpec
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &spec) != nil {
		fmt.Fprintln(stderr, "avfs: "+EnterArg+" is avfs's own helper; it takes one JSON argument")
		return 2
	}
	var setup *os.File
	if spec.SetupFD > 0 {
		setup = os.NewFile(uintptr(spec.SetupFD), "setup")
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "avfs: overlay in a user namespace: "+err.Error())
		if setup != nil {
			f := enterFailure{Kind: errs.KindOf(err), Message: err.Error()}
			var e *errs.Error
			if errors.As(err, &e) {
				f.Op, f.Path, f.Hint = e.Op, e.Path, e.Hint
				if e.Err != nil {
					f.Message = e.Err.Error()
				}
			}
			b, _ := json.Marshal(f)
			_, _ = setup.Write(b)
		}
		return 125
	}
	if err := Mount(spec.Stack, spec.Target); err != nil {
		return fail(err)
	}
	if spec.Probe {
		if err := probeCheck(spec.Target, spec.Stack.Format); err != nil {
			return fail(err)
		}
		return 0
	}
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return fail(errors.New("no command, or not an absolute path"))
	}
	dir, err := Workdir(spec.Target, spec.Cwd)
	if err != nil {
		return fail(err)
	}
	if err := os.Chdir(dir); err != nil {
		return fail(&errs.Error{Kind: errs.IoError, Op: "overlay enter", Path: dir, Err: err})
	}
	if setup != nil {
		unix.CloseOnExec(spec.SetupFD)
	}
	// Ambient capabilities belong to the thread that execs: drop them
	// there, so that the command (a uid other than 0) starts with none.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("dropping capabilities: %w", err))
	}
	err = syscall.Exec(spec.Argv[0], spec.Argv, os.Environ())
	return fail(&errs.Error{Kind: errs.NotFound, Op: "overlay enter", Path: spec.Argv[0], Err: err})
}

// ProbeUser says whether this user can mount an overlay with user.*
// markers in a user namespace of its own, by running the helper exe on a
// tiny stack in scratch whose lower holds a whiteout: nil, or why not.
func ProbeUser(exe, scratch string) error {
	dir, err := probeStack(scratch)
	if err != nil {
		return err
	}
	defer removeAll(dir)
	argv, attr := EnterCommand(exe, EnterSpec{Stack: probeLayers(dir, User), Target: filepath.Join(dir, "m"), Probe: true})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	attr(cmd.SysProcAttr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.String()), "avfs: "))
		if msg == "" {
			msg = err.Error()
		}
		return &errs.Error{Kind: errs.IoError, Op: "overlay probe", Path: dir, Err: errors.New(msg)}
	}
	return nil
}
