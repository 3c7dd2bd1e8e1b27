package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

var octalMode = regexp.MustCompile(`^[0-7]{1,4}$`)

// parseMode applies a chmod mode, octal ("755") or symbolic ("u+x,go-w",
// "a=r", "+X"), to the permission bits old of a file. Symbolic modes
// ignore the umask: a missing who means a.
func parseMode(spec string, old uint32, isDir bool) (uint32, error) {
	if octalMode.MatchString(spec) {
		v, _ := strconv.ParseUint(spec, 8, 32)
		return uint32(v), nil
	}
	bad := func() (uint32, error) {
		return 0, invalidf("chmod", "invalid mode %q: use octal (0644) or symbolic (u+x,go-w)", spec)
	}
	mode := old & 0o7777
	for _, clause := range strings.Split(spec, ",") {
		i := 0
		var who uint32
		for ; i < len(clause) && strings.IndexByte("ugoa", clause[i]) >= 0; i++ {
			who |= map[byte]uint32{'u': 0o4700, 'g': 0o2070, 'o': 0o1007, 'a': 0o7777}[clause[i]]
		}
		if who == 0 {
			who = 0o7777
		}
		if i == len(clause) {
			return bad()
		}
		for i < len(clause) {
			op := clause[i]
			if strings.IndexByte("+-=", op) < 0 {
				return bad()
			}
			i++
			var perm uint32
			for ; i < len(clause) && strings.IndexByte("+-=", clause[i]) < 0; i++ {
				switch clause[i] {
				case 'r':
					perm |= 0o444
				case 'w':
					perm |= 0o222
				case 'x':
					perm |= 0o111
				case 'X':
					if isDir || old&0o111 != 0 {
						perm |= 0o111
					}
				case 's':
					perm |= 0o6000
				case 't':
					perm |= 0o1000
				case 'u':
					perm |= (mode >> 6 & 7) * 0o111
				case 'g':
					perm |= (mode >> 3 & 7) * 0o111
				case 'o':
					perm |= (mode & 7) * 0o111
				default:
					return bad()
				}
			}
			switch op {
			case '+':
				mode |= perm & who
			case '-':
				mode &^= perm & who
			case '=':
				mode = mode&^who | perm&who
			}
		}
	}
	return mode, nil
}

// octal renders permission bits as in the JSON contract: "0644".
func octal(mode uint32) string {
	return fmt.Sprintf("%04o", mode&0o7777)
}

// modeString renders a type and permission bits as ls -l does.
func modeString(t vfs.FileType, mode uint32) string {
	b := []byte("?rwxrwxrwx")
	b[0] = map[vfs.FileType]byte{vfs.TypeDir: 'd', vfs.TypeFile: '-', vfs.TypeSymlink: 'l', vfs.TypeFifo: 'p',
		vfs.TypeSocket: 's', vfs.TypeChar: 'c', vfs.TypeBlock: 'b'}[t]
	if b[0] == 0 {
		b[0] = '?'
	}
	for i := range 9 {
		if mode&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	special := func(pos int, bit uint32, set, unset byte) {
		if mode&bit != 0 {
			if b[pos] == 'x' {
				b[pos] = set
			} else {
				b[pos] = unset
			}
		}
	}
	special(3, 0o4000, 's', 'S')
	special(6, 0o2000, 's', 'S')
	special(9, 0o1000, 't', 'T')
	return string(b)
}
