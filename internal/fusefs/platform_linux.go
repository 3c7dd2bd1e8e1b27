package fusefs

import "syscall"

// mountReadOnly is the flag of a read-only direct mount.
const mountReadOnly = syscall.MS_RDONLY
