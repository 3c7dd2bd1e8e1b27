package fusefs

import "golang.org/x/sys/unix"

// mountReadOnly is the flag of a read-only mount. go-fuse mounts through
// macFUSE's mount helper on darwin and does not pass it; the nodes refuse
// writes of a read-only mount (EROFS) either way.
const mountReadOnly = unix.MNT_RDONLY
