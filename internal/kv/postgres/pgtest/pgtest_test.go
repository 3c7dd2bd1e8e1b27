package pgtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const childEnv = "AVFS_TEST_PGTEST_CHILD"

// TestServerChild is the test binary TestServerDiesWithBinary kills: it
// starts a server, says where, and waits to be killed.
func TestServerChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("the child of TestServerDiesWithBinary")
	}
	s, err := Start(Options{Fast: true})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	pid, _, _ := strings.Cut(string(b), "\n")
	fmt.Println("server", s.dir, pid)
	time.Sleep(time.Hour)
}

// TestServerDiesWithBinary: a test binary SIGKILLed while its server runs
// (no Stop, no TestMain) leaves no postmaster behind, and the next Start
// removes the server's directory.
func TestServerDiesWithBinary(t *testing.T) {
	if _, err := binDir(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "error" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child: %s", sc.Text())
		}
		if len(f) == 3 && f[0] == "server" {
			dir = f[1]
			pid, _ = strconv.Atoi(f[2])
			break
		}
	}
	if pid <= 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child said no server")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the postmaster %d is not running before the kill: %v", pid, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	gone := false
	for range 1000 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			gone = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !gone {
		stopOrphan(dir) // leave nothing behind even when failing
		os.RemoveAll(dir)
		t.Fatalf("postmaster %d still runs 10 s after its test binary was killed", pid)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed binary's server directory: %v", err)
	}
	s, err := Start(Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the next Start left the dead binary's server directory: %v", err)
	}
}

// TestOwnerAlive: an owner file names a live process only while that very
// process (pid and start time) runs.
func TestOwnerAlive(t *testing.T) {
	st, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !ownerAlive(fmt.Appendf(nil, "%d %d\n", os.Getpid(), st)) {
		t.Error("this process is not alive")
	}
	if ownerAlive(fmt.Appendf(nil, "%d %d\n", os.Getpid(), st+1)) {
		t.Error("a reused pid is taken for its starter")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if ownerAlive(fmt.Appendf(nil, "%d 1\n", cmd.Process.Pid)) {
		t.Error("an exited process is alive")
	}
}
