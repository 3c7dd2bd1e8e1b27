package policy

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// maxNesting bounds scripts inside scripts (bash -c "sh -c '...'"): deeper
// than this is refused rather than followed forever.
const maxNesting = 8

// syntaxSh is the dialect of /bin/sh (dash here), which runs --shell
// scripts and the strings that watch, sg, git and tar hand to a shell.
const syntaxSh = syntax.LangPOSIX

// shellLang is the dialect a shell program parses; ok is false for a
// shell whose language is not read (fish).
func shellLang(prog string) (syntax.LangVariant, bool) {
	switch prog {
	case "sh", "dash", "ash":
		return syntax.LangPOSIX, true
	case "bash":
		return syntax.LangBash, true
	case "ksh", "mksh":
		return syntax.LangMirBSDKorn, true
	case "zsh":
		return syntax.LangZsh, true
	}
	return 0, false
}

// Markers that stand for expansions in evaluated words, so the path checks
// can tell $HOME from a literal, $AVFS_MOUNTPOINT from the host, and look
// up what a script assigned to a variable.
const (
	homeMark  = "\x00HOME"
	mountMark = "\x00MNT"
	dynMark   = "\x00DYN"
	varOpen   = "\x01" // \x01NAME\x02 is the value of $NAME
	varClose  = "\x02"
)

// varInfo is what a script assigns to one variable.
type varInfo struct {
	values  []string // literal values assigned (markers included)
	unknown bool     // some assignment is only known at run time
}

// scanner collects a finding for every simple command of a request.
type scanner struct {
	lang         syntax.LangVariant // dialect of the script being read
	cwd          string             // the working directory in the vault, symlinks resolved
	cwdUnknown   bool               // a cd to a directory computed at run time
	links        Links
	found        []*finding
	funcs        map[string]bool // functions the script defines: calls run their bodies
	aliases      map[string]string
	vars         map[string]*varInfo
	xargsReplace string
	inScript     bool // words come from shell text, so the shell globs them
}

// scan finds the simple commands of a request.
func scan(req Request) []*finding {
	s := &scanner{lang: syntaxSh, cwd: "/", links: req.Links, funcs: map[string]bool{},
		aliases: map[string]string{}, vars: map[string]*varInfo{}}
	if req.Cwd != "" {
		cwd, why := s.resolve("/", req.Cwd)
		if why != "" {
			s.hostFinding("(cwd)", "--cwd "+why)
		} else {
			s.cwd = cwd
		}
	}
	for _, kv := range req.Env {
		if name, val, ok := strings.Cut(kv, "="); ok {
			s.setVar(name, val, false)
			s.assignment(name, val, false)
		}
	}
	switch {
	case req.Shell != "" && len(req.Argv) > 0:
		s.deny("", "a request has a shell script or an argv, not both")
	case req.Shell != "":
		s.script(req.Shell, syntaxSh, 0)
	case len(req.Argv) > 0:
		s.command(req.Argv, make([]bool, len(req.Argv)), 0)
	}
	return s.found
}

// deny records what cannot be seen through.
func (s *scanner) deny(program, format string, args ...any) {
	f := newFinding(program, nil)
	f.add(Unparsable, fmt.Sprintf(format, args...))
	s.found = append(s.found, f)
}

func (s *scanner) setVar(name, val string, dyn bool) {
	v := s.vars[name]
	if v == nil {
		v = &varInfo{}
		s.vars[name] = v
	}
	if dyn && !strings.Contains(val, varOpen) || strings.Contains(val, dynMark) {
		v.unknown = true
	}
	v.values = append(v.values, val)
}

// script parses shell text in lang and classifies every simple command
// in it.
func (s *scanner) script(src string, lang syntax.LangVariant, level int) {
	if level > maxNesting {
		s.deny("sh", "shell scripts nested more than %d deep", maxNesting)
		return
	}
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
	if err != nil {
		s.deny("sh", "the shell script does not parse as %s: %v", lang, err)
		return
	}
	outer, outerScript := s.lang, s.inScript
	s.lang, s.inScript = lang, true
	defer func() { s.lang, s.inScript = outer, outerScript }()
	s.learn(f)
	if lang != syntax.LangPOSIX {
		s.arithmetic(f)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Stmt:
			s.stmt(x, level)
		case *syntax.ParamExp:
			if x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && x.Exp.Word != nil && strings.Contains(x.Exp.Word.Lit(), "P") {
				s.deny("${"+x.Param.Value+"@P}", "prompt expansion ${x@P} runs the command substitutions in the variable's value")
			}
		case *syntax.ForClause:
			if wi, ok := x.Loop.(*syntax.WordIter); ok {
				for _, w := range wi.Items {
					s.judgeWords("for", w)
				}
			}
		}
		return true
	})
}

// learn records what a script defines before its commands are judged:
// functions, and the values it assigns to variables.
func (s *scanner) learn(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.FuncDecl:
			if x.Name != nil {
				s.funcs[x.Name.Value] = true
			}
		case *syntax.Assign:
			if x.Name == nil {
				return true
			}
			switch {
			case x.Naked:
			case x.Value == nil || x.Append || x.Array != nil || x.Index != nil:
				s.setVar(x.Name.Value, dynMark, true)
			default:
				v, dyn := evalWord(x.Value)
				s.setVar(x.Name.Value, v, dyn)
			}
		case *syntax.ForClause:
			if wi, ok := x.Loop.(*syntax.WordIter); ok {
				if len(wi.Items) == 0 {
					s.setVar(wi.Name.Value, dynMark, true)
				}
				for _, w := range wi.Items {
					v, dyn := evalWord(w)
					s.setVar(wi.Name.Value, v, dyn)
				}
			}
		case *syntax.CallExpr:
			if len(x.Args) == 0 {
				return true
			}
			switch name, _ := evalWord(x.Args[0]); name {
			case "read", "mapfile", "readarray", "getopts", "printf", "select":
				for _, a := range x.Args[1:] {
					if w, _ := evalWord(a); isAssignment(w + "=") {
						s.setVar(w, dynMark, true)
					}
				}
			}
		}
		return true
	})
}

// judgeWords checks a word that is not a command argument (a for list).
func (s *scanner) judgeWords(ctx string, w *syntax.Word) {
	v, _ := evalWord(w)
	if why := s.hostPath(v); why != "" {
		s.hostFinding(ctx, ctx+" word "+why+": "+printable(v))
	}
}

// stmt classifies one statement's command and redirections. Nested
// statements (substitutions, bodies) are reached by the walk.
func (s *scanner) stmt(st *syntax.Stmt, level int) {
	var target *finding
	switch x := st.Cmd.(type) {
	case *syntax.CallExpr:
		for _, as := range x.Assigns {
			s.assign(as)
		}
		if len(x.Args) > 0 {
			target = s.call(st, x, level)
		}
	case *syntax.DeclClause:
		for _, as := range x.Args {
			s.assign(as)
		}
	}
	for _, r := range st.Redirs {
		if target == nil {
			target = newFinding("(redirection)", nil)
			s.found = append(s.found, target)
		}
		s.redirect(target, r)
	}
	if target != nil {
		if len(target.cats) == 0 {
			target.add(ReadOnly, "only opens files for reading")
		}
		if target.dynamic {
			if _, ok := target.cats[ReadOnly]; ok {
				delete(target.cats, ReadOnly)
				if len(target.cats) == 0 {
					target.add(Unknown, "a word is known only at run time, so what it reads is not known")
				}
			}
		}
	}
}

// assign judges one assignment of a script (X=v cmd, export X=v, X=v).
func (s *scanner) assign(as *syntax.Assign) {
	if as.Name == nil || as.Value == nil {
		return
	}
	v, dyn := evalWord(as.Value)
	s.assignment(as.Name.Value, v, s.stillDynamic(v, dyn))
}

// Variables whose value changes what runs: a program's search path, code
// loaded into every program, or a file every shell sources.
var runVars = map[string]string{
	"PATH": "changes which program every later name runs", "LD_PRELOAD": "loads code into every program",
	"LD_LIBRARY_PATH": "changes the libraries every program loads", "LD_AUDIT": "loads code into every program",
	"BASH_ENV": "names a file every bash sources", "ENV": "names a file every sh sources",
	"PYTHONPATH": "changes the modules Python loads", "PYTHONSTARTUP": "names a file Python runs",
	"NODE_OPTIONS": "changes what node loads", "PERL5OPT": "changes what perl loads",
	"RUBYOPT": "changes what ruby loads", "GCONV_PATH": "loads code into every program",
	"SHELLOPTS": "changes how every bash runs", "BASHOPTS": "changes how every bash runs",
}

// Variables whose value is a command some program runs.
var commandVars = set("GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_ASKPASS",
	"SSH_ASKPASS", "PAGER", "EDITOR", "VISUAL", "PROMPT_COMMAND", "PS4", "MANPAGER", "LESSOPEN", "TAR_OPTIONS", "GIT_PROXY_COMMAND")

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// assignment judges NAME=VALUE given to a command, a script or --env.
func (s *scanner) assignment(name, val string, dyn bool) {
	why, runs := runVars[name]
	if strings.HasPrefix(name, "BASH_FUNC_") {
		why, runs = "defines a bash function", true
	}
	switch {
	case runs:
		f := newFinding(name+"=", []string{printable(val)})
		f.add(Unknown, name+" "+why)
		for _, part := range strings.Split(val, ":") {
			if name == "PATH" && (systemDir(part) || strings.Contains(part, varOpen+"PATH"+varClose)) {
				continue // a system program directory, or the old $PATH
			}
			if h := s.hostPath(part); h != "" {
				f.add(HostEscape, name+" "+h+": "+printable(part))
			}
		}
		s.found = append(s.found, f)
	case commandVars[name]:
		f := newFinding(name+"=", []string{printable(val)})
		f.add(Unknown, name+" is a command a program runs")
		s.found = append(s.found, f)
		if dyn {
			s.deny(name+"=", "%s is a command computed when the script runs", name)
		} else if val != "" {
			s.script(val, syntaxSh, 1)
		}
	}
}

// systemDir reports a directory of the system's programs, which only
// root writes.
func systemDir(dir string) bool {
	clean := path.Clean(dir)
	for _, p := range []string{"/usr", "/bin", "/sbin", "/opt", "/snap/bin"} {
		if strings.HasPrefix(clean+"/", p+"/") {
			return true
		}
	}
	return false
}

// call classifies a simple command of a script.
func (s *scanner) call(st *syntax.Stmt, x *syntax.CallExpr, level int) *finding {
	argv := make([]string, len(x.Args))
	dyn := make([]bool, len(x.Args))
	for i, w := range x.Args {
		argv[i], dyn[i] = evalWord(w)
		if i > 0 {
			dyn[i] = s.stillDynamic(argv[i], dyn[i])
		}
	}
	if dyn[0] || isPattern(argv[0]) || hasBraces(argv[0]) {
		s.deny(printable(argv[0]), "the command name is computed when the script runs")
		return nil
	}
	if val, ok := s.aliases[argv[0]]; ok {
		rest, err := quoteWords(argv[1:], s.lang)
		if err != nil || anyTrue(dyn[1:]) {
			s.deny(argv[0], "the alias %s is called with words the policy cannot requote", argv[0])
			return nil
		}
		s.script(val+" "+rest, s.lang, level+1)
		return nil
	}
	if s.funcs[argv[0]] {
		// Its body is classified where it is defined; its arguments
		// are judged here.
		f := newFinding(argv[0], argv[1:])
		for i, a := range argv[1:] {
			if why := s.hostPath(a); why != "" {
				f.add(HostEscape, "argument "+why+": "+printable(a))
			}
			f.dynamic = f.dynamic || dyn[i+1]
		}
		f.add(ReadOnly, "calls the function "+argv[0]+", whose commands are classified on their own")
		s.found = append(s.found, f)
		return f
	}
	target := s.command(argv, dyn, level)
	switch argv[0] { // after its own arguments were judged from where it starts
	case "cd", "pushd":
		s.chdir(argv[1:], dyn[1:])
	case "popd":
		s.cwdUnknown = true
	}
	if target != nil && isShell(target.program) && len(target.args) == 0 {
		s.stdinScript(st, target, level)
	}
	return target
}

func quoteWords(words []string, lang syntax.LangVariant) (string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		q, err := syntax.Quote(w, lang)
		if err != nil {
			return "", err
		}
		out[i] = q
	}
	return strings.Join(out, " "), nil
}

// chdir follows a cd of the script, so that later relative paths are
// judged from where they are used.
func (s *scanner) chdir(args []string, dyn []bool) {
	for i, a := range args {
		if strings.HasPrefix(a, "-") && a != "-" {
			continue
		}
		if dyn[i] || a == "-" || isPattern(a) || strings.Contains(a, homeMark) {
			s.cwdUnknown = true
			return
		}
		start := s.cwd
		if rest, ok := strings.CutPrefix(a, mountMark); ok {
			start, a = "/", "."+rest
		}
		if strings.HasPrefix(a, "/") {
			return // a host path: judged as one
		}
		if cwd, why := s.resolve(start, a); why == "" {
			s.cwd = cwd
		}
		return
	}
	s.cwd = "/" // cd alone: $HOME, judged as the root, the strictest place
}

// stdinScript handles a bare shell: it runs what arrives on its input,
// which is visible only when that is a literal here-document.
func (s *scanner) stdinScript(st *syntax.Stmt, f *finding, level int) {
	lang, ok := shellLang(f.program)
	if !ok {
		return
	}
	for _, r := range st.Redirs {
		var w *syntax.Word
		switch {
		case (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil:
			w = r.Hdoc
		case r.Op == syntax.WordHdoc && r.Word != nil:
			w = r.Word
		default:
			continue
		}
		if body, dyn := evalWord(w); !dyn {
			delete(f.cats, Unparsable)
			f.add(ReadOnly, "a shell running a here-document")
			s.script(body, lang, level+1)
			return
		}
	}
}

var quietTargets = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true}

// redirect adds what a redirection does to the command it belongs to.
func (s *scanner) redirect(f *finding, r *syntax.Redirect) {
	if r.Word == nil {
		return
	}
	target, dyn := evalWord(r.Word)
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return
	case syntax.DplOut, syntax.DplIn:
		if target == "-" || isDigits(target) {
			return
		}
	}
	if s.stillDynamic(target, dyn) {
		f.dynamic = true
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
	r := strings.NewReplacer(homeMark, "$HOME", mountMark, "$AVFS_MOUNTPOINT", dynMark, "$(...)", varOpen, "$", varClose, "")
	return r.Replace(s)
}

// stillDynamic reports a word that is known only at run time, after the
// values the script assigns to its variables: $x is known when every
// assignment to x is.
func (s *scanner) stillDynamic(word string, dyn bool) bool {
	if !dyn {
		return false
	}
	if strings.Contains(word, dynMark) || !strings.Contains(word, varOpen) {
		return true // a substitution, or $'...' and "$"-quoting of another kind
	}
	rest := word
	for {
		i := strings.Index(rest, varOpen)
		if i < 0 {
			return false
		}
		j := strings.Index(rest[i:], varClose)
		if j < 0 {
			return true
		}
		v := s.vars[rest[i+1:i+j]]
		if v == nil || v.unknown {
			return true
		}
		for _, val := range v.values {
			if strings.Contains(val, varOpen) {
				return true // a value built from other variables
			}
		}
		rest = rest[i+j+1:]
	}
}

// evalWord is what a word is as far as can be known before running: the
// literal text with quotes and escapes removed, expansions replaced by
// markers. dynamic is true when any part is only known at run time.
func evalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	dyn := false
	for i, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && i+1 < len(w.Parts) && strings.HasSuffix(l.Value, "$") {
			if q, ok := w.Parts[i+1].(*syntax.SglQuoted); ok && !q.Dollar {
				// $'...' read by a POSIX parser: a shell that knows it
				// decodes the escapes, so the word is judged both ways.
				b.WriteString(unescape(strings.TrimSuffix(l.Value, "$"), false))
				w.Parts[i+1] = &syntax.SglQuoted{Left: q.Left, Right: q.Right, Dollar: true, Value: q.Value}
				dyn = true
				continue
			}
		}
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
		if !x.Dollar {
			b.WriteString(x.Value)
			return false
		}
		// $'...': the escapes are decoded for the path checks, and the
		// word still counts as computed.
		// A config of its own: given nil, expand prepares one shared
		// zero config in place, a data race between classifications.
		v, err := expand.Literal(&expand.Config{}, &syntax.Word{Parts: []syntax.WordPart{x}})
		if err != nil {
			v = dynMark
		}
		b.WriteString(v)
		return true
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
		plain := !x.Excl && !x.Length && x.Exp == nil && x.Repl == nil && x.Slice == nil && x.Index == nil && x.NestedParam == nil
		switch {
		case name == "HOME":
			b.WriteString(homeMark)
		case name == "AVFS_MOUNTPOINT" && plain:
			b.WriteString(mountMark)
			return false
		case plain && name != "":
			b.WriteString(varOpen + name + varClose)
		default:
			b.WriteString(dynMark)
		}
		return true
	default: // command, process and arithmetic substitutions, extended globs
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
