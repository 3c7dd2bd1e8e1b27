package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The mount section measures each workload a third time, through go-fuse's
// loopback file system: a FUSE mount that passes every request to a
// directory of the native disk and stores nothing itself. Its ratio to the
// native disk is what FUSE round trips cost on this machine for that work,
// with the kernel told the same as avfs's mount (caches for an hour,
// default_permissions, no READDIRPLUS). The loopback still opens and
// releases files, which avfs's mount skips, so it can be slower than avfs
// where a workload opens many files; it is a reference, not a bound.

// ServeLoopback serves a loopback of dir at mnt until the mount goes away
// or the process gets SIGTERM or SIGINT. It prints "ready" on stdout once
// the mount answers. avfsbench runs it in its own process
// (-serve-loopback), as avfs runs its mount.
func ServeLoopback(dir, mnt string) error {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return err
	}
	timeout := time.Hour
	server, err := fs.Mount(mnt, root, &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		MountOptions: fuse.MountOptions{
			FsName:             "avfsbench-loopback",
			Name:               "loopback",
			DirectMount:        true,
			Options:            []string{"default_permissions"},
			DisableReadDirPlus: true,
			MaxWrite:           1 << 20,
			MaxReadAhead:       1 << 20,
		},
	})
	if err != nil {
		return err
	}
	if err := server.WaitMount(); err != nil {
		_ = server.Unmount()
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		_ = server.Unmount()
	}()
	fmt.Println("ready")
	server.Wait()
	return nil
}

// startLoopback serves a loopback of dir at mnt from a child process
// (this binary with -serve-loopback) and returns once it is mounted; stop
// unmounts it and waits for the child.
func startLoopback(dir, mnt string) (stop func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := exec.Command(self, "-serve-loopback", dir, "-loopback-at", mnt)
	c.Stderr = os.Stderr
	// The child unmounts when this process dies, however it dies.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = c.Process.Kill()
		_ = c.Wait()
		return nil, fmt.Errorf("the loopback mount at %s did not start (%q)", mnt, line)
	}
	return func() error {
		err := c.Process.Signal(syscall.SIGTERM)
		if werr := c.Wait(); err == nil {
			err = werr
		}
		if err != nil {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			return errors.Join(errors.New("stopping the loopback mount"), err)
		}
		return nil
	}, nil
}
