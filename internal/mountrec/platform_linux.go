package mountrec

import "syscall"

// MNTDetach is the unmount flag that detaches a mount whose files are still
// in use (Linux: MNT_DETACH, a lazy unmount).
const MNTDetach = syscall.MNT_DETACH
