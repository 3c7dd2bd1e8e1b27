//go:build !linux

package sqlite

import "os"

// datasync makes f's data durable; see datasync_linux.go.
func datasync(f *os.File) error { return f.Sync() }
