package proxy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// The tests of this file's harness run the real avfs binary (built once
// from ./cmd/avfs) as root or as another user, in a tree under /var/tmp:
// /tmp is private inside an isolated run, so canaries under it would be
// hidden for the wrong reason.

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// nobody is the unprivileged user the tests run avfs as.
const nobody = 65534

// avfsBinary builds bin/avfs once per test binary, readable by everyone.
func avfsBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		if binDir, binErr = os.MkdirTemp("/var/tmp", "avfs-bin-"); binErr != nil {
			return
		}
		_ = os.Chmod(binDir, 0o755)
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(binDir, "avfs"), "./cmd/avfs")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = &buildError{out: string(out), err: err}
		}
	})
	if binErr != nil {
		t.Fatalf("building avfs: %v", binErr)
	}
	return filepath.Join(binDir, "avfs")
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// user is a home of avfs run by one uid: a fake $HOME, $AVFS_HOME with a
// vault "v", all under root.
type user struct {
	t      *testing.T
	uid    int
	bin    string
	root   string // under /var/tmp, removed at the end
	home   string // $HOME
	ah     string // $AVFS_HOME
	extra  []string
	args   []string // given to every proxy exec before the test's own (a --transport)
	runDir string   // known after the first run that mounts
}

// needFuse skips unless FUSE mounts work for uid: root with /dev/fuse, or
// another user with a world-usable /dev/fuse and fusermount3.
func needFuse(t *testing.T, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (it runs avfs as root and as uid 65534)")
	}
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Skip("needs /dev/fuse")
	}
	if uid != 0 {
		if fi.Mode().Perm()&0o006 != 0o006 {
			t.Skip("/dev/fuse is not usable by other users (mode " + fi.Mode().Perm().String() + "; Debian's udev makes it 0666)")
		}
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("needs fusermount3 (Debian's fuse3) to mount as another user")
		}
	}
}

// newUser makes a home for uid with a vault "v".
func newUser(t *testing.T, uid int) *user {
	t.Helper()
	needFuse(t, uid)
	u := &user{t: t, uid: uid, bin: avfsBinary(t)}
	root, err := os.MkdirTemp("/var/tmp", "avfs-iso-")
	if err != nil {
		t.Fatal(err)
	}
	u.root = root
	_ = os.Chmod(root, 0o755)
	u.home, u.ah = filepath.Join(root, "home"), filepath.Join(root, "home", ".avfs")
	u.mkdir(u.home)
	t.Cleanup(u.cleanup)
	u.mustAvfs("vault", "create", "v", "--use")
	return u
}

// mkdir makes a directory owned by the user.
func (u *user) mkdir(dir string) {
	u.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		u.t.Fatal(err)
	}
	u.chown(dir)
}

func (u *user) chown(path string) {
	u.t.Helper()
	if err := os.Lchown(path, u.uid, u.uid); err != nil {
		u.t.Fatal(err)
	}
}

// write writes a file owned by the user.
func (u *user) write(path, content string, mode os.FileMode) {
	u.t.Helper()
	u.mkdir(filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		u.t.Fatal(err)
	}
	_ = os.Chmod(path, mode)
	u.chown(path)
}

// environ is the environment avfs runs with.
func (u *user) environ() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin",
		"HOME=" + u.home, "AVFS_HOME=" + u.ah, "LANG=C.UTF-8", "AVFS_VAULT=", "AVFS_PROXY_LINGER=0"}
	return append(env, u.extra...)
}

// command is a process of the user (uid, its own process group).
func (u *user) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = u.environ(), u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.uid)}
	}
	return cmd
}

// avfs runs the binary as the user: exit code, stdout, stderr.
func (u *user) avfs(args ...string) (int, string, string) {
	cmd := u.command(u.bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errOut.String()
}

func (u *user) mustAvfs(args ...string) string {
	u.t.Helper()
	code, out, errOut := u.avfs(args...)
	if code != 0 {
		u.t.Fatalf("avfs %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// exec runs proxy exec with --json and returns the envelope (nil when it
// printed none) and the exit code.
func (u *user) exec(args ...string) (*proxy.Envelope, int, string) {
	code, out, errOut := u.avfs(append(append([]string{"proxy", "exec", "--json"}, u.args...), args...)...)
	var env proxy.Envelope
	if err := json.Unmarshal([]byte(out), &env); err != nil || env.Kind != proxy.Kind {
		return nil, code, out + errOut
	}
	if env.Result.Mountpoint != nil && u.runDir == "" && strings.Contains(*env.Result.Mountpoint, "/mnt/") {
		u.runDir = filepath.Dir(filepath.Dir(*env.Result.Mountpoint))
	}
	return &env, code, out + errOut
}

// unmountAll ends every mount of the user's home.
func (u *user) unmountAll() {
	code, out, _ := u.avfs("mounts", "--json")
	if code == 0 {
		var r struct {
			Mounts []struct{ Mountpoint string } `json:"mounts"`
		}
		_ = json.Unmarshal([]byte(out), &r)
		for _, m := range r.Mounts {
			u.avfs("unmount", "--lazy", m.Mountpoint)
		}
	}
	// Mounts whose records are gone (a run deleted the home).
	for _, m := range fuseMounts() {
		if strings.HasPrefix(m, u.root) || (u.runDir != "" && strings.HasPrefix(m, u.runDir)) {
			if u.uid == 0 {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			} else {
				_ = u.command("fusermount3", "-uz", m).Run()
			}
		}
	}
}

func (u *user) cleanup() {
	u.unmountAll()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && u.mounted() {
		time.Sleep(20 * time.Millisecond)
	}
	if u.mounted() {
		u.t.Errorf("mounts left behind: %v", fuseMounts())
	} else if u.runDir != "" {
		_ = os.RemoveAll(u.runDir)
	}
	_ = os.RemoveAll(u.root)
}

func (u *user) mounted() bool {
	for _, m := range fuseMounts() {
		if strings.HasPrefix(m, u.root) || (u.runDir != "" && strings.HasPrefix(m, u.runDir)) {
			return true
		}
	}
	return false
}

// fuseMounts lists the mountpoints of avfs mounts on the host.
func fuseMounts() []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "fuse.avfs" {
				out = append(out, f[4])
			}
		}
	}
	return out
}

// isMounted reports whether an avfs mount is at dir.
func isMounted(dir string) bool {
	for _, m := range fuseMounts() {
		if m == dir {
			return true
		}
	}
	return false
}

// TestMain's cleanup of the built binary.
func removeBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}
