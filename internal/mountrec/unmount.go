package mountrec

import (
	"bytes"
	"errors"
	"os/exec"
	"syscall"
)

// Unmount unmounts dir (lazily: detached, gone when its last file
// closes). A user who is not root cannot unmount by the system call and
// goes through fusermount3, as they mounted; the error is then the
// system call's (EPERM) when fusermount3 fails too.
func Unmount(dir string, lazy bool) error {
	flags := 0
	if lazy {
		flags = MNTDetach
	}
	err := syscall.Unmount(dir, flags)
	if !errors.Is(err, syscall.EPERM) {
		return err
	}
	args := []string{"-u", "-q"}
	if lazy {
		args = append(args, "-z")
	}
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if p, lerr := exec.LookPath(prog); lerr == nil {
			out, ferr := exec.Command(p, append(args, dir)...).CombinedOutput()
			if ferr == nil {
				return nil
			}
			if !lazy && bytes.Contains(out, []byte("busy")) {
				return syscall.EBUSY
			}
			return err
		}
	}
	return err
}
