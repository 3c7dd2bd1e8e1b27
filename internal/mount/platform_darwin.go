package mount

import "golang.org/x/sys/unix"

// MNTDetach is the unmount flag used where Linux detaches a mount still in
// use. Darwin has no lazy unmount; a forced unmount (MNT_FORCE) is the
// nearest: it unmounts at once, and files still open in the mount fail
// from then on.
const MNTDetach = unix.MNT_FORCE

// mountReadOnly is the flag of a read-only mount. go-fuse mounts through
// macFUSE's mount helper on darwin and does not pass it; the nodes refuse
// writes of a read-only mount (EROFS) either way.
const mountReadOnly = unix.MNT_RDONLY
