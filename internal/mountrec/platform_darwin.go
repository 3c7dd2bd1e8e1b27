package mountrec

import "golang.org/x/sys/unix"

// MNTDetach is the unmount flag used where Linux detaches a mount still in
// use. Darwin has no lazy unmount; a forced unmount (MNT_FORCE) is the
// nearest: it unmounts at once, and files still open in the mount fail
// from then on.
const MNTDetach = unix.MNT_FORCE
