//go:build linux

package overlay

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRacy: stat data within the window of a walk's start (or after it)
// is racy, older is not; a whole-second ctime is racy for a second.
//
// The race itself cannot be shown on this kernel: its multigrain
// timestamps (6.13+, ext4, xfs, btrfs, tmpfs) stamp a change after a
// stat finer than the clock tick, so a rewrite right after a walk always
// moves ctime. The window is for the kernels and filesystems without them.
func TestRacy(t *testing.T) {
	var res unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &res); err == nil && res.Nano() > 0 {
		if racyWindow < 2*time.Duration(res.Nano()) || racyWindow > 50*time.Millisecond {
			t.Errorf("racy window %v for a coarse clock of %v", racyWindow, time.Duration(res.Nano()))
		}
	}
	start := time.Unix(1_700_000_000, 500_000_000)
	ts := func(d time.Duration) unix.Timespec { return unix.NsecToTimespec(start.Add(d).UnixNano()) }
	for _, c := range []struct {
		name  string
		ctime unix.Timespec
		racy  bool
	}{
		{"after the start", ts(time.Millisecond), true},
		{"within the window", ts(-racyWindow / 2), true},
		{"older than the window", ts(-racyWindow - time.Millisecond), false},
		{"a whole second, this one", unix.Timespec{Sec: start.Unix()}, true},
		{"a whole second, the one before", unix.Timespec{Sec: start.Unix() - 1}, false},
	} {
		if got := racy(c.ctime, start); got != c.racy {
			t.Errorf("%s: racy %v, want %v", c.name, got, c.racy)
		}
	}
}

// TestCtimeWithinATick: what the window rests on, on this machine: a
// change is stamped no earlier than one tick (half the window) before
// the moment it began.
func TestCtimeWithinATick(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	for i := range 200 {
		before := time.Now()
		if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if lag := before.Sub(time.Unix(st.Ctim.Sec, st.Ctim.Nsec)); lag > racyWindow/2 {
			t.Fatalf("a write was stamped %v before it began (window %v)", lag, racyWindow)
		}
	}
}
