//go:build !linux

package overlay

import (
	"fmt"
	"io"
)

// EnterMain fails: overlayfs is Linux's.
func EnterMain(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "avfs: overlayfs is a Linux file system")
	return 125
}
