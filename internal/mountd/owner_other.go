//go:build !linux

package mountd

// watchPidfd has no pidfd to wait on here: WatchOwner polls.
func watchPidfd(int) <-chan struct{} { return nil }
