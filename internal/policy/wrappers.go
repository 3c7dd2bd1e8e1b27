package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A wrapper is a program that runs another one (env, nice, timeout,
// xargs, strace ...). The classifier looks through it to the program that
// really runs, and judges the wrapper's own options on the way: some
// change the user (sudo, setpriv --reuid), attach to another process
// (strace -p, taskset -p) or hand a string to a shell (watch, script -c).
type wrapper struct {
	short string   // short options that take a value
	long  []string // long options that take a value (also accepted as --opt=value)
	fixed int      // plain words between the options and the command (timeout's duration)
	// judge looks at the options seen (name → value, "-x" or "--long")
	// and the words after them; it may record findings, replace the
	// command, or say that no command runs here.
	judge func(s *scanner, w *unwrapCtx) bool
}

// unwrapCtx is one wrapper being looked through.
type unwrapCtx struct {
	prog  string
	opts  map[string]string
	order []string // options in the order given
	rest  []string // the words after the options (and the fixed words)
	dyn   []bool
	level int

	// What judge decides, besides its result:
	replace    []string // the command is these words instead of rest (env -S)
	replaceDyn []bool
	script     string // the wrapper runs this shell text (watch, sg, script -c)
	scriptDyn  bool
	noCommand  bool // the wrapper runs nothing here (taskset -p PID)
}

func (w *unwrapCtx) has(names ...string) bool {
	for _, n := range names {
		if _, ok := w.opts[n]; ok {
			return true
		}
	}
	return false
}

// wrappers is the table of the programs looked through, by name.
var wrappers map[string]wrapper

func init() {
	otherUser := func(why string) func(*scanner, *unwrapCtx) bool {
		return func(s *scanner, w *unwrapCtx) bool {
			s.hostFinding(w.prog, w.prog+" "+why)
			return true
		}
	}
	onPid := func(flags ...string) func(*scanner, *unwrapCtx) bool {
		return func(s *scanner, w *unwrapCtx) bool {
			if w.has(flags...) {
				s.hostFinding(w.prog, w.prog+" "+strings.Join(flags, "/")+" acts on another process")
				w.noCommand = true
			}
			return true
		}
	}
	wrappers = map[string]wrapper{
		"env": {short: "uCS", long: []string{"--unset", "--chdir", "--split-string"}, judge: judgeEnv},
		"sudo": {short: "ughpCDrtUTR", long: []string{"--user", "--group", "--host", "--prompt", "--chdir", "--role", "--type",
			"--other-user", "--command-timeout", "--close-from"}, judge: otherUser("runs the command as another user")},
		"doas":    {short: "uC", judge: otherUser("runs the command as another user")},
		"pkexec":  {long: []string{"--user"}, judge: otherUser("runs the command as another user")},
		"runuser": {short: "ugGcsw", long: []string{"--user", "--group", "--supp-group", "--command", "--shell", "--whitelist-environment"}, judge: judgeSu},
		"su":      {short: "ugGcsw", long: []string{"--group", "--supp-group", "--command", "--shell", "--whitelist-environment"}, judge: judgeSu},
		"setpriv": {long: []string{"--reuid", "--regid", "--ruid", "--euid", "--rgid", "--egid", "--groups", "--inh-caps", "--ambient-caps",
			"--bounding-set", "--securebits", "--pdeathsig", "--selinux-label", "--apparmor-profile", "--landlock-access",
			"--landlock-rule", "--seccomp-filter"}, judge: judgeSetpriv},
		"nice":    {short: "n", long: []string{"--adjustment"}},
		"ionice":  {short: "cnpPut", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}, judge: onPid("-p", "-P", "-u", "--pid", "--pgid", "--uid")},
		"chrt":    {short: "TPD", long: []string{"--sched-runtime", "--sched-period", "--sched-deadline"}, fixed: 1, judge: judgeChrt},
		"taskset": {fixed: 1, judge: judgeTaskset},
		"timeout": {short: "sk", long: []string{"--signal", "--kill-after"}, fixed: 1},
		"xargs": {short: "adEeIiLlnPs", long: []string{"--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args",
			"--max-procs", "--max-chars", "--process-slot-var"}, judge: judgeXargs},
		"busybox": {}, "nohup": {}, "builtin": {}, "unbuffer": {}, "chronic": {}, "fakeroot": {}, "catchsegv": {},
		"setsid":   {},
		"command":  {judge: judgeCommand},
		"exec":     {short: "a"},
		"stdbuf":   {short: "ioe", long: []string{"--input", "--output", "--error"}},
		"time":     {short: "fo", long: []string{"--format", "--output"}},
		"flock":    {short: "wEc", long: []string{"--timeout", "--wait", "--conflict-exit-code", "--command"}, fixed: 1, judge: judgeFlock},
		"script":   {short: "cEIOBTt", long: []string{"--command", "--echo", "--log-in", "--log-out", "--log-io", "--log-timing", "--logging-format", "--output-limit"}, judge: judgeScript},
		"strace":   {short: "abeEIoOpPsSuUX", long: []string{"--attach", "--user", "--output", "--env", "--trace", "--signal", "--status"}, judge: judgeTracer},
		"ltrace":   {short: "aAeEDFlLnopsuwx", long: []string{"--output", "--library"}, judge: judgeTracer},
		"watch":    {short: "nqd", long: []string{"--interval", "--equexit", "--differences", "--shell-prog"}, judge: judgeWatch},
		"parallel": {short: "jaSdEInNkIX", long: []string{"--jobs", "--arg-file", "--sshlogin", "--slf", "--delimiter", "--colsep", "--joblog", "--results", "--tmpdir", "--workdir", "--basefile", "--env", "--max-args", "--max-replace-args", "--sshloginfile", "--transferfile", "--return"}, judge: judgeParallel},
		"sg":       {judge: judgeSg},
		"numactl":  {short: "NmCPlp", long: []string{"--cpunodebind", "--membind", "--physcpubind", "--preferred", "--interleave"}},
		"prlimit":  {long: []string{"--pid", "--as", "--core", "--cpu", "--data", "--fsize", "--nofile", "--nproc", "--stack"}, judge: onPid("-p", "--pid")},
		"faketime": {fixed: 1},
		"nsenter":  {short: "tSGrw", long: []string{"--target", "--setuid", "--setgid", "--root", "--wd"}, judge: otherUser("enters another process's namespaces")},
		"unshare":  {long: []string{"--map-user", "--map-group", "--setuid", "--setgid", "--root", "--wd", "--propagation"}, judge: otherUser("makes new namespaces, which can mount over the workspace")},
		"chroot":   {long: []string{"--userspec", "--groups"}, fixed: 1, judge: otherUser("changes the root directory")},
	}
}

// parseOpts reads a wrapper's options from argv (argv[0] is the wrapper):
// clusters (-in5), attached and separate values (-n5, -n 5, --opt=v, --opt v),
// up to "--" or the first plain word. It returns the index after them.
func parseOpts(argv []string, wr wrapper) (int, map[string]string, []string) {
	opts := map[string]string{}
	var order []string
	set := func(k, v string) { opts[k] = v; order = append(order, k) }
	i := 1
	for i < len(argv) {
		a := argv[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		i++
		if strings.HasPrefix(a, "--") {
			name, val, eq := strings.Cut(a, "=")
			if !eq && contains(wr.long, name) && i < len(argv) {
				val = argv[i]
				i++
			}
			set(name, val)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j : j+1]
			if strings.Contains(wr.short, c) {
				val := a[j+1:]
				if val == "" && i < len(argv) {
					val = argv[i]
					i++
				}
				set("-"+c, val)
				break
			}
			set("-"+c, "")
		}
	}
	return i, opts, order
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unwrap looks through the wrapper argv[0] names. It returns ok false when
// argv[0] is not a wrapper. Otherwise ctx says what runs: rest (or
// replace) from the command's name on, a script, or nothing.
func (s *scanner) unwrap(argv []string, dyn []bool, level int) (*unwrapCtx, bool) {
	prog := progName(argv[0])
	wr, ok := wrappers[prog]
	if !ok {
		return nil, false
	}
	i, opts, order := parseOpts(argv, wr)
	for k := 0; k < wr.fixed && i < len(argv); k++ {
		i++
	}
	w := &unwrapCtx{prog: prog, opts: opts, order: order, rest: argv[i:], dyn: dyn[i:], level: level}
	if wr.judge != nil && !wr.judge(s, w) {
		return nil, false
	}
	return w, true
}

// hostFinding records a command that acts on the host.
func (s *scanner) hostFinding(program, why string) {
	f := newFinding(program, nil)
	f.add(HostEscape, why)
	s.found = append(s.found, f)
}

func judgeEnv(s *scanner, w *unwrapCtx) bool {
	if split, ok := w.opts["-S"]; ok || w.has("--split-string") {
		if !ok {
			split = w.opts["--split-string"]
		}
		words, dyn, good := splitWords(split)
		if !good {
			s.deny("env", "env -S %q is not a plain command line", split)
			w.noCommand = true
			return true
		}
		w.replace = append(words, w.rest...)
		w.replaceDyn = append(dyn, w.dyn...)
	}
	rest, dyn := w.rest, w.dyn
	if w.replace != nil {
		rest, dyn = w.replace, w.replaceDyn
	}
	n := 0
	for n < len(rest) && isAssignment(rest[n]) {
		name, val, _ := strings.Cut(rest[n], "=")
		s.assignment(name, val, dyn[n])
		n++
	}
	if w.replace != nil {
		w.replace, w.replaceDyn = rest[n:], dyn[n:]
	} else {
		w.rest, w.dyn = rest[n:], dyn[n:]
	}
	return true
}

// isAssignment reports a NAME=VALUE word.
func isAssignment(word string) bool {
	name, _, ok := strings.Cut(word, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// splitWords splits text into words as a shell would, without running
// anything; good is false when the text is more than plain words.
func splitWords(text string) ([]string, []bool, bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(text), "")
	if err != nil || len(f.Stmts) > 1 {
		return nil, nil, false
	}
	if len(f.Stmts) == 0 {
		return []string{}, []bool{}, true
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(st.Redirs) > 0 || st.Background || st.Negated || len(call.Assigns) > 0 {
		return nil, nil, false
	}
	words := make([]string, len(call.Args))
	dyn := make([]bool, len(call.Args))
	for i, a := range call.Args {
		words[i], dyn[i] = evalWord(a)
	}
	return words, dyn, true
}

func judgeSu(s *scanner, w *unwrapCtx) bool {
	s.hostFinding(w.prog, w.prog+" runs commands as another user")
	if c, ok := w.opts["-c"]; ok {
		w.script = c
	} else if c, ok := w.opts["--command"]; ok {
		w.script = c
	} else if w.prog == "su" || !w.has("-u", "--user") {
		w.noCommand = true // su USER: a login shell
	}
	return true
}

func judgeSetpriv(s *scanner, w *unwrapCtx) bool {
	if w.has("--reuid", "--regid", "--ruid", "--euid", "--rgid", "--egid", "--groups", "--init-groups", "--keep-groups", "--clear-groups") {
		s.hostFinding("setpriv", "setpriv changes the user or groups the command runs as")
	}
	return true
}

func judgeChrt(s *scanner, w *unwrapCtx) bool {
	if w.has("-p", "--pid") {
		s.hostFinding("chrt", "chrt -p changes another process's scheduling")
		w.noCommand = true
	}
	if w.has("-m", "--max") {
		w.noCommand = true
	}
	return true
}

func judgeTaskset(s *scanner, w *unwrapCtx) bool {
	if w.has("-p", "--pid") {
		s.hostFinding("taskset", "taskset -p changes another process's CPU affinity")
		w.noCommand = true
	}
	return true
}

func judgeCommand(s *scanner, w *unwrapCtx) bool {
	return !w.has("-v", "-V") // command -v only looks the name up
}

// judgeXargs: the program xargs runs may come from its input (xargs env,
// xargs -I{} {}, xargs sh -c); that is not visible.
func judgeXargs(s *scanner, w *unwrapCtx) bool {
	rep := ""
	if v, ok := w.opts["-I"]; ok {
		rep = v
	} else if v, ok := w.opts["--replace"]; ok {
		rep = v
		if rep == "" {
			rep = "{}"
		}
	} else if w.has("-i") {
		rep = w.opts["-i"]
		if rep == "" {
			rep = "{}"
		}
	}
	s.xargsReplace = rep
	return true
}

func judgeFlock(s *scanner, w *unwrapCtx) bool {
	if c, ok := w.opts["-c"]; ok {
		w.script = c
	} else if c, ok := w.opts["--command"]; ok {
		w.script = c
	} else if len(w.rest) > 0 && (w.rest[0] == "-c" || w.rest[0] == "--command") {
		if len(w.rest) < 2 {
			w.noCommand = true
			return true
		}
		w.script, w.scriptDyn = w.rest[1], w.dyn[1]
	} else if len(w.rest) == 0 {
		w.noCommand = true // flock FD
	}
	return true
}

func judgeScript(s *scanner, w *unwrapCtx) bool {
	c, ok := w.opts["-c"]
	if !ok {
		c, ok = w.opts["--command"]
	}
	if !ok {
		s.deny("script", "script without -c runs a shell that reads its input")
		w.noCommand = true
		return true
	}
	w.script = c
	return true
}

func judgeTracer(s *scanner, w *unwrapCtx) bool {
	if w.has("-p", "--attach") {
		s.hostFinding(w.prog, w.prog+" -p attaches to another process")
		w.noCommand = len(w.rest) == 0
	}
	if w.has("-u", "--user") {
		s.hostFinding(w.prog, w.prog+" -u runs the command as another user")
	}
	return true
}

// judgeWatch: watch hands its words, joined by spaces, to sh -c (unless
// -x, which execs them).
func judgeWatch(s *scanner, w *unwrapCtx) bool {
	f := newFinding("watch", nil)
	f.add(Interactive, "watch redraws a terminal")
	s.found = append(s.found, f)
	if w.has("-x", "--exec") || len(w.rest) == 0 {
		return true
	}
	w.script, w.scriptDyn = strings.Join(w.rest, " "), anyTrue(w.dyn)
	return true
}

// judgeParallel: GNU parallel joins the command's words and runs them with
// a shell, once per input (after :::, or read from its input).
func judgeParallel(s *scanner, w *unwrapCtx) bool {
	if w.has("-S", "--sshlogin", "--slf", "--sshloginfile") {
		f := newFinding("parallel", nil)
		f.add(Networked, "parallel --sshlogin runs jobs on other hosts")
		s.found = append(s.found, f)
	}
	end := len(w.rest)
	for i, a := range w.rest {
		if strings.HasPrefix(a, ":::") {
			end = i
			break
		}
	}
	if end == 0 {
		s.deny("parallel", "parallel without a command runs the commands it reads from its input")
		w.noCommand = true
		return true
	}
	cmd := strings.Join(w.rest[:end], " ")
	if strings.Contains(cmd, "{") && end == len(w.rest) {
		s.deny("parallel", "parallel fills its command from its input")
	}
	for i := end; i < len(w.rest); i++ {
		if why := s.hostPath(w.rest[i]); why != "" {
			s.hostFinding("parallel", "argument "+why+": "+printable(w.rest[i]))
		}
	}
	w.script, w.scriptDyn = cmd, anyTrue(w.dyn[:end])
	return true
}

// judgeSg: sg GROUP [-c] COMMAND runs COMMAND with /bin/sh -c.
func judgeSg(s *scanner, w *unwrapCtx) bool {
	rest, dyn := w.rest, w.dyn
	if len(rest) > 0 && rest[0] == "-" {
		rest, dyn = rest[1:], dyn[1:]
	}
	if len(rest) < 2 {
		w.noCommand = true
		return true
	}
	rest, dyn = rest[1:], dyn[1:]
	if rest[0] == "-c" {
		rest, dyn = rest[1:], dyn[1:]
	}
	w.script, w.scriptDyn = strings.Join(rest, " "), anyTrue(dyn)
	return true
}

func anyTrue(b []bool) bool {
	for _, x := range b {
		if x {
			return true
		}
	}
	return false
}
