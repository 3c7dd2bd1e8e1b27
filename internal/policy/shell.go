package policy

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// maxNesting bounds scripts inside scripts (bash -c "sh -c '...'"): deeper
// than this is refused rather than followed forever.
const maxNesting = 8

// Markers that stand for expansions in evaluated words, so the path checks
// can tell $HOME from a literal and $AVFS_MOUNTPOINT from the host.
const (
	homeMark  = "\x00HOME"
	mountMark = "\x00MNT"
	dynMark   = "\x00DYN"
)

// scanner collects a finding for every simple command of a request.
type scanner struct {
	cwdDepth int // how many directories below the workspace root the cwd is
	found    []*finding
	funcs    map[string]bool // functions the script defines: calls run their bodies
}

// scan finds the simple commands of a request.
func scan(req Request) []*finding {
	s := &scanner{cwdDepth: depthOf(req.Cwd), funcs: map[string]bool{}}
	switch {
	case req.Shell != "" && len(req.Argv) > 0:
		s.deny("", "a request has a shell script or an argv, not both")
	case req.Shell != "":
		s.script(req.Shell, 0)
	case len(req.Argv) > 0:
		s.command(req.Argv, make([]bool, len(req.Argv)), 0)
	}
	return s.found
}

func depthOf(cwd string) int {
	n := 0
	for _, seg := range strings.Split(path.Clean("/"+cwd), "/") {
		if seg != "" {
			n++
		}
	}
	return n
}

// deny records what cannot be seen through.
func (s *scanner) deny(program, format string, args ...any) {
	f := newFinding(program, nil)
	f.add(Unparsable, fmt.Sprintf(format, args...))
	s.found = append(s.found, f)
}

// script parses shell text and classifies every simple command in it.
func (s *scanner) script(src string, level int) {
	if level > maxNesting {
		s.deny("sh", "shell scripts nested more than %d deep", maxNesting)
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		s.deny("sh", "the shell script does not parse: %v", err)
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if fd, ok := n.(*syntax.FuncDecl); ok && fd.Name != nil {
			s.funcs[fd.Name.Value] = true
		}
		return true
	})
	syntax.Walk(f, func(n syntax.Node) bool {
		if st, ok := n.(*syntax.Stmt); ok {
			s.stmt(st, level)
		}
		return true
	})
}

// stmt classifies one statement's command and redirections. Nested
// statements (substitutions, bodies) are reached by the walk.
func (s *scanner) stmt(st *syntax.Stmt, level int) {
	var target *finding
	if call, ok := st.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
		argv := make([]string, len(call.Args))
		dyn := make([]bool, len(call.Args))
		for i, w := range call.Args {
			argv[i], dyn[i] = evalWord(w)
		}
		if dyn[0] || strings.ContainsAny(argv[0], "*?[{") {
			s.deny(printable(argv[0]), "the command name is computed when the script runs")
			return
		}
		if s.funcs[argv[0]] {
			return // its body is classified where it is defined
		}
		target = s.command(argv, dyn, level)
		if target != nil && isShell(target.program) && len(target.args) == 0 {
			s.stdinScript(st, target, level)
		}
	}
	for _, r := range st.Redirs {
		if target == nil {
			target = newFinding("(redirection)", nil)
			s.found = append(s.found, target)
		}
		s.redirect(target, r)
	}
	if target != nil && len(target.cats) == 0 {
		target.add(ReadOnly, "only opens files for reading")
	}
}

// stdinScript handles a bare shell: it runs what arrives on its input,
// which is visible only when that is a literal here-document.
func (s *scanner) stdinScript(st *syntax.Stmt, f *finding, level int) {
	for _, r := range st.Redirs {
		if (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil {
			if body, dyn := evalWord(r.Hdoc); !dyn {
				delete(f.cats, Unparsable)
				f.add(ReadOnly, "a shell running a here-document")
				s.script(body, level+1)
				return
			}
		}
		if r.Op == syntax.WordHdoc && r.Word != nil {
			if body, dyn := evalWord(r.Word); !dyn {
				delete(f.cats, Unparsable)
				f.add(ReadOnly, "a shell running a here-string")
				s.script(body, level+1)
				return
			}
		}
	}
}

var quietTargets = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true}

// redirect adds what a redirection does to the command it belongs to.
func (s *scanner) redirect(f *finding, r *syntax.Redirect) {
	if r.Word == nil {
		return
	}
	target, _ := evalWord(r.Word)
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return
	case syntax.DplOut, syntax.DplIn:
		if target == "-" || isDigits(target) {
			return
		}
	}
	if why := s.hostPath(target); why != "" {
		f.add(HostEscape, fmt.Sprintf("redirection %s %s", why, printable(target)))
	}
	if r.Op != syntax.RdrIn && r.Op != syntax.DplIn && !quietTargets[target] {
		f.add(Mutating, "redirection writes "+printable(target))
	}
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// printable shows an evaluated word with its expansions marked.
func printable(s string) string {
	r := strings.NewReplacer(homeMark, "$HOME", mountMark, "$AVFS_MOUNTPOINT", dynMark, "$(...)")
	return r.Replace(s)
}

// evalWord is what a word is as far as can be known before running: the
// literal text with quotes and escapes removed, expansions replaced by
// markers. dynamic is true when any part is only known at run time.
func evalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	dyn := false
	for i, p := range w.Parts {
		dyn = evalPart(&b, p, false, i == 0) || dyn
	}
	return b.String(), dyn
}

func evalPart(b *strings.Builder, p syntax.WordPart, quoted, first bool) bool {
	switch x := p.(type) {
	case *syntax.Lit:
		v := x.Value
		if !quoted && first && strings.HasPrefix(v, "~") {
			// Tilde expansion: ~ and ~user are home directories.
			rest := v[1:]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[i:]
			} else {
				rest = ""
			}
			b.WriteString(homeMark + rest)
			return false
		}
		b.WriteString(unescape(v, quoted))
		return false
	case *syntax.SglQuoted:
		b.WriteString(x.Value)
		return x.Dollar // $'...' escapes are not interpreted here
	case *syntax.DblQuoted:
		dyn := x.Dollar
		for _, q := range x.Parts {
			dyn = evalPart(b, q, true, false) || dyn
		}
		return dyn
	case *syntax.ParamExp:
		name := ""
		if x.Param != nil {
			name = x.Param.Value
		}
		plain := !x.Excl && !x.Length && x.Exp == nil && x.Repl == nil && x.Slice == nil && x.Index == nil
		switch {
		case name == "HOME":
			b.WriteString(homeMark)
		case name == "AVFS_MOUNTPOINT" && plain:
			b.WriteString(mountMark)
			return false
		default:
			b.WriteString(dynMark)
		}
		return true
	default: // command, process and arithmetic substitutions, globs, braces
		b.WriteString(dynMark)
		return true
	}
}

// unescape removes the backslashes the shell removes: every one outside
// quotes, and before $ ` " \ and newline inside double quotes.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			next := s[i+1]
			if !quoted || strings.IndexByte("$`\"\\\n", next) >= 0 {
				if next != '\n' {
					b.WriteByte(next)
				}
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hostPrefixes are the host directories a workspace command has no reason
// to name. "/" itself is matched exactly.
var hostPrefixes = []string{"/etc", "/home", "/root", "/var", "/usr", "/proc", "/sys", "/dev", "/tmp",
	"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt", "/boot", "/run", "/srv", "/mnt", "/media", "/snap"}

// deviceOK are device files that reach nothing of the host.
var deviceOK = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/stdin": true,
	"/dev/zero": true, "/dev/random": true, "/dev/urandom": true, "/dev/tty": true}

// hostPath says why s names a place outside the workspace ("" if not). It
// looks at the whole word and at what follows an '=' or ':' in it, so
// --file=/etc/x, of=/dev/sda and PATH-like lists are seen.
func (s *scanner) hostPath(word string) string {
	cands := []string{word}
	for _, sep := range []string{"=", ":"} {
		if i := strings.Index(word, sep); i >= 0 {
			cands = append(cands, word[i+1:])
		}
	}
	for _, c := range cands {
		if why := s.hostPath1(c); why != "" {
			return why
		}
	}
	return ""
}

func (s *scanner) hostPath1(p string) string {
	if strings.Contains(p, homeMark) {
		return "names the home directory"
	}
	depth := s.cwdDepth
	if rest, ok := strings.CutPrefix(p, mountMark); ok {
		p, depth = "."+rest, 0
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
		return ""
	}
	if !strings.Contains(p, "..") {
		return ""
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "..":
			depth--
			if depth < 0 {
				return "climbs above the workspace root"
			}
		case "", ".":
		default:
			depth++
		}
	}
	return ""
}
