//go:build linux

package overlay

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGone: what a lingering workspace's ingest removes after the upper
// dropped it: a removed name once, not what it held; nothing below a
// name that is now a file or a symlink (the ingest replaced it, and a
// path through a symlink leads elsewhere); nothing the upper still holds.
func TestGone(t *testing.T) {
	before := sigs(map[string]bool{"/d": true, "/d/f": false, "/d/e": true, "/d/e/g": false,
		"/s": true, "/s/x": false, "/k": true, "/k/y": false, "/k/z": false, "/w": false})
	now := sigs(map[string]bool{"/s": false, "/k": true, "/k/z": false, "/w": false})
	if got, want := gone(before, now), []string{"/d", "/k/y"}; !slices.Equal(got, want) {
		t.Errorf("gone: %v, want %v", got, want)
	}
}

// sigs is the stat data of paths mapped to whether each is a directory.
func sigs(dirs map[string]bool) map[string]sig {
	out := map[string]sig{}
	for p, d := range dirs {
		out[p] = sig{mode: unix.S_IFREG}
		if d {
			out[p] = sig{mode: unix.S_IFDIR}
		}
	}
	return out
}
