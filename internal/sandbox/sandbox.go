// Package sandbox builds the kernel boundary a proxy run executes in:
// fresh user, mount, PID, IPC and UTS namespaces, and a network namespace
// of its own unless the run's decision grants the host's. Inside it the
// host's root is read-only, the workspace (the run's mount) and a few
// named host directories are writable, /tmp is private, and avfs's own
// state and the user's secrets are hidden.
//
// The namespaces are made by bubblewrap (Debian's bubblewrap, `bwrap`),
// the tool Flatpak and Anthropic's sandbox runtime use: it starts in
// about 4 ms here, needs no privilege (user namespaces), and its mount
// set-up has been reviewed for years, where a Go re-implementation of the
// same steps (uid maps, a re-executed PID 1, recursive read-only binds)
// would be new code on the boundary itself.
//
// The classifier decides what runs; this package makes the decision hold
// for what it cannot see (a `python3 -c` that opens a socket, a script
// that writes outside the workspace).
package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Unavailable is the kind of `--isolate on` on a host where the kernel
// refuses the namespaces or bubblewrap is missing; nothing was started.
// Part of the JSON contract.
const Unavailable errs.Kind = "IsolationUnavailable"

// Mode is what a run asks for: auto (isolate when the host can, else run
// as before and say so), on (isolate or refuse), off.
type Mode string

// The modes of --isolate.
const (
	Auto Mode = "auto"
	On   Mode = "on"
	Off  Mode = "off"
)

// ParseMode reads an --isolate value; "" is auto.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "":
		return Auto, nil
	case Auto, On, Off:
		return Mode(s), nil
	}
	return "", errs.New(errs.InvalidInput, "proxy exec", "--isolate is auto, on or off, not %q", s)
}

// What Isolation reports (JSON contract).
const (
	Namespaces  = "namespaces" // the run was isolated
	None        = "none"       // it ran on the host, as a plain process
	NetworkNone = "none"       // its own loopback only
	NetworkHost = "host"       // the host's network
)

// Isolation is what a run's boundary enforced, as the envelope and
// `policy check` report it.
type Isolation struct {
	Requested string   `json:"requested"` // the --isolate asked for: auto, on, off
	Mode      string   `json:"mode"`      // namespaces or none
	Network   string   `json:"network"`   // none or host; host whenever mode is none
	Hidden    []string `json:"hidden"`    // host paths the run cannot see
	Writable  []string `json:"writable"`  // host paths it may write besides the workspace and its /tmp
	ReadOnly  []string `json:"read_only"` // paths made read-only inside otherwise writable trees
	Reason    string   `json:"reason"`    // why this mode and network
}

// Config is what one run's boundary is made of. Paths are absolute.
type Config struct {
	Workspace string // the run's mount: writable
	AvfsHome  string // hidden
	RunDir    string // the runtime dir of the mounts: hidden, except the workspace
	UserHome  string // where the default secrets are looked for
	Network   bool   // the decision grants the host's network
	// NetworkWhy says why the network is granted or not.
	NetworkWhy string
	// From the policy's [sandbox] table, resolved (Resolve).
	Hide, ReadOnly, Writable []string
}

// Plan is a boundary ready to wrap a command.
type Plan struct {
	Isolation Isolation
	bwrap     string
	args      []string
}

// Isolated reports whether commands run inside namespaces.
func (p *Plan) Isolated() bool { return p != nil && p.bwrap != "" }

// Wrap returns the argv that runs argv inside the boundary with its
// working directory dir (the same path inside as outside). bubblewrap
// writes its status to statusFD (Started reads it).
func (p *Plan) Wrap(argv []string, dir string, statusFD int) []string {
	if !p.Isolated() {
		return argv
	}
	out := make([]string, 0, len(p.args)+len(argv)+6)
	out = append(out, p.bwrap)
	out = append(out, p.args...)
	out = append(out, "--json-status-fd", strconv.Itoa(statusFD), "--chdir", dir, "--")
	return append(out, argv...)
}

// Started reports whether bubblewrap's status (what it wrote to the
// status fd) shows the command started: a boundary it could not build
// never starts it.
func Started(status []byte) bool { return bytes.Contains(status, []byte(`"child-pid"`)) }

// Fallback turns the plan into one without namespaces after bubblewrap
// could not build the boundary (msg: what it said), for --isolate auto.
func (p *Plan) Fallback(msg string) {
	p.bwrap, p.args = "", nil
	p.Isolation.Mode, p.Isolation.Network = None, NetworkHost
	p.Isolation.Hidden, p.Isolation.Writable, p.Isolation.ReadOnly = []string{}, []string{}, []string{}
	p.Isolation.Reason = "isolation unavailable, running without it (--isolate auto): bubblewrap failed: " + msg
}

// Failed is the Unavailable error of a boundary bubblewrap could not
// build (--isolate on).
func Failed(msg string) error { return unavailable("bubblewrap failed: %s", msg) }

// Forget drops the cached probe in cacheDir, after a run found that it
// no longer holds.
func Forget(cacheDir string) { _ = os.Remove(filepath.Join(cacheDir, probeFile)) }

// DefaultSecrets are the paths under the user's home hidden from every
// isolated run, besides /etc/shadow, /etc/gshadow and other users' homes.
var DefaultSecrets = []string{".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
	".netrc", ".git-credentials", ".npmrc", ".pypirc"}

// hostSecrets are hidden whoever runs (and the host's ssh keys).
var hostSecrets = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}

// New plans the boundary of one run. mode off, or auto on a host that
// cannot isolate (probe is the Probe's error), gives a plan that runs
// commands as plain processes and says why; on with a failed probe is an
// Unavailable error.
func New(mode Mode, cfg Config, bwrap string, probe error) (*Plan, error) {
	iso := Isolation{Requested: string(mode), Mode: None, Network: NetworkHost, Hidden: []string{}, Writable: []string{}, ReadOnly: []string{}}
	switch {
	case mode == Off:
		iso.Reason = "--isolate off: the command runs as a plain process; only the policy stands between it and the host"
		return &Plan{Isolation: iso}, nil
	case probe != nil && mode == On:
		return nil, probe
	case probe != nil:
		iso.Reason = "isolation unavailable, running without it (--isolate auto): " + why(probe)
		return &Plan{Isolation: iso}, nil
	}
	b := &builder{}
	b.add("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	iso.Network = NetworkHost
	if !cfg.Network {
		b.add("--unshare-net")
		iso.Network = NetworkNone
	}
	// No capabilities inside, even for root mapped to root: the command
	// cannot unmount its workspace or mount over the boundary.
	// The command runs in a session of its own: a timeout's SIGTERM goes
	// to its group and not to bubblewrap, which would tear the sandbox
	// down at once instead of granting the grace period.
	b.add("--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
	// Writable dirs before what is hidden: a writable dir under a hidden
	// one stays hidden.
	for _, w := range cfg.Writable {
		if isDir(w) {
			b.add("--bind", w, w)
			iso.Writable = append(iso.Writable, w)
		}
	}
	b.keep = cfg.Workspace
	hidden := b.hide(hiddenPaths(cfg))
	b.add("--bind", cfg.Workspace, cfg.Workspace)
	for _, d := range b.later { // the hidden dirs that hold the workspace
		b.add("--remount-ro", d)
	}
	for _, h := range cfg.Hide {
		if within(h, cfg.Workspace) {
			hidden = append(hidden, b.hide([]string{h})...)
		}
	}
	for _, r := range cfg.ReadOnly {
		if exists(r) {
			b.add("--ro-bind", r, r)
			iso.ReadOnly = append(iso.ReadOnly, r)
		}
	}
	iso.Mode, iso.Hidden = Namespaces, hidden
	iso.Reason = "user, mount, PID, IPC and UTS namespaces (bubblewrap); " + cfg.NetworkWhy
	return &Plan{Isolation: iso, bwrap: bwrap, args: b.args}, nil
}

// hiddenPaths lists what a run must not see outside the workspace: avfs's
// home, the runtime dir, the secrets, other users' homes and the policy's
// hide list.
func hiddenPaths(cfg Config) []string {
	var out []string
	out = append(out, cfg.AvfsHome, cfg.RunDir)
	out = append(out, hostSecrets...)
	keys, _ := filepath.Glob("/etc/ssh/ssh_host_*_key") // the host's private keys, readable by root mapped to root
	out = append(out, keys...)
	if cfg.UserHome != "" {
		for _, s := range DefaultSecrets {
			out = append(out, filepath.Join(cfg.UserHome, s))
		}
	}
	out = append(out, otherHomes(cfg.UserHome)...)
	for _, h := range cfg.Hide {
		if !within(h, cfg.Workspace) { // those are hidden after the workspace is bound
			out = append(out, h)
		}
	}
	return out
}

// otherHomes are the homes of other people: /root for anyone but root,
// and the directories of /home that are not the user's own.
func otherHomes(own string) []string {
	var out []string
	if own != "/root" {
		out = append(out, "/root")
	}
	ents, _ := os.ReadDir("/home")
	for _, e := range ents {
		p := filepath.Join("/home", e.Name())
		if e.IsDir() && !within(own, p) {
			out = append(out, p)
		}
	}
	return out
}

// builder collects bubblewrap's arguments.
type builder struct {
	args []string
	seen map[string]bool
	// keep is the workspace: a hidden dir that holds it is made read-only
	// only after the workspace is bound into it (later).
	keep  string
	later []string
}

func (b *builder) add(a ...string) { b.args = append(b.args, a...) }

// hide covers each existing path: a directory with an empty read-only
// tmpfs, anything else with /dev/null. A symlink is followed, so the
// file it names is what is covered. It returns the paths it hid.
func (b *builder) hide(paths []string) []string {
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	var out []string
	for _, p := range paths {
		if p == "" || p == "/" {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || b.seen[real] {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil {
			continue
		}
		b.seen[real] = true
		switch {
		case fi.IsDir() && b.keep != "" && within(b.keep, real):
			b.add("--tmpfs", real)
			b.later = append(b.later, real)
		case fi.IsDir():
			b.add("--tmpfs", real, "--remount-ro", real)
		default:
			b.add("--ro-bind", "/dev/null", real)
		}
		out = append(out, p)
	}
	return out
}

// Resolve turns the paths of a [sandbox] table into absolute ones: "~/x"
// is under home, "$GOCACHE", "$GOMODCACHE" and "$NPM_CACHE" are those
// caches as the tools find them in env, a relative path is inside the
// workspace.
func Resolve(paths []string, home, workspace string, getenv func(string) string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		var r string
		switch {
		case p == "$GOCACHE":
			r = goCache(home, getenv)
		case p == "$GOMODCACHE":
			r = goModCache(home, getenv)
		case p == "$NPM_CACHE":
			r = getenv("npm_config_cache")
			if r == "" && home != "" {
				r = filepath.Join(home, ".npm")
			}
		case p == "~" || strings.HasPrefix(p, "~/"):
			if home == "" {
				continue
			}
			r = filepath.Join(home, strings.TrimPrefix(p, "~"))
		case filepath.IsAbs(p):
			r = filepath.Clean(p)
		default:
			r = filepath.Join(workspace, p)
		}
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func goCache(home string, getenv func(string) string) string {
	if c := getenv("GOCACHE"); c != "" && c != "off" {
		return c
	}
	if x := getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "go-build")
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".cache", "go-build")
}

func goModCache(home string, getenv func(string) string) string {
	if c := getenv("GOMODCACHE"); c != "" {
		return c
	}
	if gp := getenv("GOPATH"); gp != "" {
		return filepath.Join(filepath.SplitList(gp)[0], "pkg", "mod")
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, "go", "pkg", "mod")
}

// Prepare creates the writable directories that do not exist yet (a
// build's first run creates its cache), so that they can be bound; one
// that cannot be created is left out.
func Prepare(writable []string) {
	for _, w := range writable {
		if _, err := os.Lstat(w); os.IsNotExist(err) {
			_ = os.MkdirAll(w, 0o755)
		}
	}
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// unavailable is an Unavailable error saying why.
func unavailable(format string, args ...any) error {
	return &errs.Error{Kind: Unavailable, Op: "proxy exec", Err: fmt.Errorf(format, args...),
		Hint: "install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces, or pass --isolate auto or off"}
}
