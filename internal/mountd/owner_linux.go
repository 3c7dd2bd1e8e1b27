package mountd

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchPidfd waits for pid's exit on a pidfd; nil when there is none
// (an old kernel, or no such process: then polling decides).
func watchPidfd(pid int) <-chan struct{} {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, syscall.EINTR) {
				return // readable: the process has exited (or poll failed)
			}
		}
	}()
	return gone
}
