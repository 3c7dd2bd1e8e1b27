package mountd

import (
	"errors"
	"syscall"
	"time"
)

// WatchOwner returns a channel that is closed once process pid has
// exited: a mount started for one proxy run, or for a library caller,
// ends with its owner even when the owner is killed before it can
// unmount. On Linux it waits on a pidfd (no confusion with a later
// process of the same pid); elsewhere it polls. A pid that does not exist
// closes the channel at once.
func WatchOwner(pid int) <-chan struct{} {
	if gone := watchPidfd(pid); gone != nil {
		return gone
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for alive(pid) {
			time.Sleep(250 * time.Millisecond)
		}
	}()
	return gone
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
