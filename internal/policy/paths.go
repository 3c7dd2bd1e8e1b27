package policy

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// Links is what the classifier may know of the workspace: the target of
// a symlink at a clean absolute path of the vault. Without it, paths are
// judged by their text alone.
type Links interface {
	Readlink(p string) (target string, ok bool)
}

// hostPrefixes are the host directories a workspace command has no reason
// to name. "/" itself is matched exactly.
var hostPrefixes = []string{"/etc", "/home", "/root", "/var", "/usr", "/proc", "/sys", "/dev", "/tmp",
	"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt", "/boot", "/run", "/srv", "/mnt", "/media", "/snap"}

// deviceOK are device files that reach nothing of the host.
var deviceOK = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/stdin": true,
	"/dev/zero": true, "/dev/random": true, "/dev/urandom": true, "/dev/tty": true}

// maxCandidates bounds the expansions of one word that are judged.
const maxCandidates = 64

// hostPath says why word names a place outside the workspace ("" if not).
// It judges every value the word can take as far as the script shows
// (its variables' assignments, brace expansion), the whole word and what
// follows an '=', a ':' or a short option's letter (--file=/etc/x,
// of=/dev/sda, PATH-like lists, -C/, -t/tmp/x).
func (s *scanner) hostPath(word string) string {
	for _, w := range s.candidates(word) {
		for _, b := range braces(w) {
			for _, c := range pieces(b) {
				if why := s.hostPath1(c); why != "" {
					return why
				}
			}
		}
	}
	return ""
}

// pieces are the parts of a word that may be paths.
func pieces(word string) []string {
	out := []string{word}
	if i := strings.Index(word, "="); i >= 0 {
		out = append(out, word[i+1:])
	}
	if strings.Contains(word, ":") {
		out = append(out, strings.Split(word, ":")...)
	}
	if len(word) > 2 && word[0] == '-' && word[1] != '-' {
		// -C/ -t/tmp/x -xf../x: the value attached to a short option.
		if i := strings.IndexAny(word, "/~.\x00"); i > 1 {
			out = append(out, word[i:])
		}
	}
	return out
}

// candidates replaces each $name the script assigned by the values it
// assigns (those not known stay run-time markers).
func (s *scanner) candidates(word string) []string {
	i := strings.Index(word, varOpen)
	if i < 0 {
		return []string{word}
	}
	j := strings.Index(word[i:], varClose)
	if j < 0 {
		return []string{word}
	}
	name, rest := word[i+1:i+j], word[i+j+1:]
	vals := []string{dynMark}
	if v := s.vars[name]; v != nil {
		vals = v.values
		if v.unknown {
			vals = append(vals, dynMark)
		}
	}
	var out []string
	for _, tail := range s.candidates(rest) {
		for _, v := range vals {
			if strings.Contains(v, varOpen+name+varClose) {
				v = dynMark // x=$x/..: not followed
			}
			for _, vv := range s.candidates(v) {
				out = append(out, word[:i]+vv+tail)
				if len(out) >= maxCandidates {
					return out
				}
			}
		}
	}
	return out
}

// braces is bash's brace expansion of a word ({a,b} and nesting), bounded;
// it is applied whatever the dialect, which can only add paths to judge.
func braces(word string) []string {
	open := -1
	depth := 0
	for i := 0; i < len(word); i++ {
		switch word[i] {
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth > 0 {
				continue
			}
			body := word[open+1 : i]
			alts := splitTop(body)
			if len(alts) < 2 {
				open = -1
				continue
			}
			var out []string
			for _, a := range alts {
				for _, e := range braces(word[:open] + a + word[i+1:]) {
					out = append(out, e)
					if len(out) >= maxCandidates {
						return out
					}
				}
			}
			return out
		}
	}
	return []string{word}
}

func hasBraces(word string) bool { return len(braces(word)) > 1 }

// splitTop splits a brace body at its top-level commas.
func splitTop(body string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, body[start:i])
				start = i + 1
			}
		}
	}
	return append(out, body[start:])
}

func isGlob(seg string) bool { return isPattern(seg) }

// isPattern reports a word the shell would glob: * or ?, or a [...]
// class ("[" alone is the test command).
func isPattern(word string) bool {
	if strings.ContainsAny(word, "*?") {
		return true
	}
	i := strings.IndexByte(word, '[')
	return i >= 0 && strings.IndexByte(word[i+1:], ']') > 0
}

func (s *scanner) hostPath1(p string) string {
	if strings.Contains(p, homeMark) {
		return "names the home directory"
	}
	start := s.cwd
	if rest, ok := strings.CutPrefix(p, mountMark); ok {
		p, start = "."+rest, "/"
	}
	if strings.HasPrefix(p, "/") {
		clean := path.Clean(p)
		if clean == "/" {
			return "names the host's root"
		}
		if deviceOK[clean] || strings.HasPrefix(clean, "/dev/fd/") {
			return ""
		}
		for _, h := range hostPrefixes {
			if clean == h || strings.HasPrefix(clean, h+"/") {
				return "reaches into the host's " + h
			}
		}
		first, _, _ := strings.Cut(clean[1:], "/")
		if isGlob(first) || strings.Contains(first, dynMark) {
			for _, h := range hostPrefixes {
				if ok, _ := path.Match(first, h[1:]); ok || strings.Contains(first, dynMark) {
					return "may reach into the host's " + h + " by a pattern"
				}
			}
		}
		if s.isSelf(clean) {
			return "names the avfs program"
		}
		return ""
	}
	dotGlob := s.inScript && (strings.Contains(p, ".*") || strings.Contains(p, ".?") || strings.Contains(p, ".["))
	if !strings.Contains(p, "..") && !dotGlob && (s.links == nil || strings.HasPrefix(p, "-")) {
		return "" // without "..", only a symlink can lead out; an option is not a path
	}
	if s.cwdUnknown && strings.Contains(p, "..") {
		return "climbs from a directory computed at run time"
	}
	_, why := s.resolve(start, p)
	return why
}

// maxLinks is how many symlinks one path may follow, as the kernel's.
const maxLinks = 40

// resolve follows the relative path p from the vault directory dir,
// through the vault's symlinks when they are known. It returns the
// resulting vault path, or why it leaves the workspace: climbing above
// its root, or a symlink to an absolute target (which the kernel resolves
// on the host, not in the vault).
func (s *scanner) resolve(dir, p string) (string, string) {
	cur := path.Clean("/" + dir)
	queue := strings.Split(p, "/")
	if strings.HasPrefix(p, "/") {
		cur = "/"
	}
	hops := 0
	for len(queue) > 0 {
		seg := queue[0]
		queue = queue[1:]
		if ok, _ := path.Match(seg, ".."); seg == ".." || s.inScript && isGlob(seg) && ok {
			if cur == "/" {
				return "", "climbs above the workspace root"
			}
			cur = path.Dir(cur)
			continue
		}
		if seg == "" || seg == "." {
			continue
		}
		next := path.Join(cur, seg)
		if s.links != nil && !isGlob(seg) && !strings.ContainsAny(seg, "\x00\x01") {
			if target, ok := s.links.Readlink(next); ok {
				if hops++; hops > maxLinks {
					return "", "follows too many symlinks"
				}
				if strings.HasPrefix(target, "/") {
					return "", "follows the symlink " + next + " out of the workspace, to " + target
				}
				queue = append(strings.Split(target, "/"), queue...)
				continue
			}
		}
		cur = next
	}
	return cur, ""
}

var (
	selfOnce  sync.Once
	selfPaths []string
)

// isSelf reports a path that is the running avfs program.
func (s *scanner) isSelf(word string) bool {
	if !strings.HasPrefix(word, "/") {
		return false
	}
	selfOnce.Do(func() {
		if exe, err := os.Executable(); err == nil {
			selfPaths = append(selfPaths, exe)
			if real, err := filepath.EvalSymlinks(exe); err == nil && real != exe {
				selfPaths = append(selfPaths, real)
			}
		}
	})
	return contains(selfPaths, path.Clean(word))
}
