package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// TestMain makes the test binary double as the avfs command, so scripts
// run `avfs ...` as a real process.
func TestMain(m *testing.M) {
	testscript.Main(pgMain{m}, map[string]func(){
		"avfs": func() {
			code := Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			if f := os.Getenv("AVFS_TEST_HWM"); f != "" {
				reportPeakMemory(f)
			}
			os.Exit(code)
		},
	})
}

// pgMain runs the tests under pgtest.Main, which stops the PostgreSQL
// server the store tests started.
type pgMain struct{ m *testing.M }

func (p pgMain) Run() int {
	code := pgtest.Main(p.m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// reportPeakMemory writes the process's peak resident memory (VmHWM, in
// KiB) to file, for TestStreamingMemory. rusage cannot tell it: a child's
// ru_maxrss starts from its parent's.
func reportPeakMemory(file string) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			_ = os.WriteFile(file, []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))), 0o644)
		}
	}
}

// TestScripts runs testdata/script/*.txtar, each in its own $AVFS_HOME.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("AVFS_HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("AVFS_VAULT", "")
			// A -race binary otherwise sleeps a second at every exit.
			env.Setenv("GORACE", "atexit_sleep_ms=0")
			return nil
		},
		Condition: func(cond string) (bool, error) { return storeCond(cond, false) },
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mkfile":   cmdMkfile,
			"hardlink": cmdHardlink,
			"samefile": cmdSamefile,
			"mtime":    cmdMtime,
			"perm":     cmdPerm,
			"dircycle": cmdDircycle,
			"mkfifo":   cmdMkfifo,
			"damage":   cmdDamage,
		},
	})
}

// mkfile PATH SIZE writes SIZE bytes of repeatable pseudo-random data.
func cmdMkfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkfile PATH SIZE")
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	r := rand.New(rand.NewPCG(uint64(size), 7))
	buf := make([]byte, 1<<16)
	for size > 0 {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		n := min(size, int64(len(buf)))
		_, err := f.Write(buf[:n])
		ts.Check(err)
		size -= n
	}
}

// hardlink OLD NEW makes a hard link on the host.
func cmdHardlink(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: hardlink OLD NEW")
	}
	ts.Check(os.Link(ts.MkAbs(args[0]), ts.MkAbs(args[1])))
}

// samefile A B checks that two host paths are one inode (! negates).
func cmdSamefile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: samefile A B")
	}
	a, err := os.Lstat(ts.MkAbs(args[0]))
	ts.Check(err)
	b, err := os.Lstat(ts.MkAbs(args[1]))
	ts.Check(err)
	if os.SameFile(a, b) == neg {
		ts.Fatalf("samefile %s %s: %v", args[0], args[1], !neg)
	}
}

// mtime PATH [RFC3339] sets a host file's mtime (without following a
// symlink), or checks it when the time is prefixed with "=".
func cmdMtime(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: mtime PATH [=]TIME")
	}
	p := ts.MkAbs(args[0])
	check := args[1][0] == '='
	want, err := time.Parse(time.RFC3339Nano, args[1][map[bool]int{true: 1}[check]:])
	ts.Check(err)
	if !check {
		t := unix.NsecToTimespec(want.UnixNano())
		ts.Check(unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW))
		return
	}
	fi, err := os.Lstat(p)
	ts.Check(err)
	if fi.ModTime().Equal(want) == neg {
		ts.Fatalf("mtime of %s is %s, want %s", args[0], fi.ModTime().UTC().Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

// perm PATH MODE checks a host file's permission bits (octal).
func cmdPerm(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: perm PATH MODE")
	}
	fi, err := os.Lstat(ts.MkAbs(args[0]))
	ts.Check(err)
	got := fmt.Sprintf("%04o", uint32(fi.Mode().Perm())|specialBits(fi.Mode()))
	if (got == args[1]) == neg {
		ts.Fatalf("mode of %s is %s, want %s", args[0], got, args[1])
	}
}

// damage VAULT flips one byte inside every stored chunk of the vault file,
// through its engine, as damage of the disk would.
func cmdDamage(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: damage VAULT")
	}
	h, err := registry.Open(ts.Getenv("AVFS_HOME"))
	ts.Check(err)
	eng, err := engines.Open(h.Path(args[0]))
	ts.Check(err)
	defer eng.Close()
	ts.Check(eng.Update(func(tx kv.Tx) error {
		var keys, vals [][]byte
		err := tx.Scan([]byte{'C'}, []byte{'D'}, func(k, v []byte) (bool, error) {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			return true, nil
		})
		for i := range keys {
			vals[i][len(vals[i])/2] ^= 0x40
			if err == nil {
				err = tx.Put(keys[i], vals[i])
			}
		}
		return err
	}))
}
