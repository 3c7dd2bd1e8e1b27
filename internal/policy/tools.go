package policy

import (
	"regexp"
	"strings"
)

// Classifiers of programs whose arguments decide what they do.

func classifyRm(s *scanner, f *finding, c call) bool {
	if hasFlag(c.args, "r", "--recursive") || hasFlag(c.args, "f", "--force") || hasFlag(c.args, "R", "") {
		f.add(Destructive, "rm -r/-f removes files in bulk")
	} else {
		f.add(Mutating, "rm removes files")
	}
	return false
}

func classifyRsync(s *scanner, f *finding, c call) bool {
	if anyRemote(c.args) || hasPrefixArg(c.args, "--rsh") || hasPrefixArg(c.args, "-e") {
		f.add(Networked, "rsync to or from a remote host")
	} else {
		f.add(Mutating, "rsync writes files")
	}
	return false
}

func classifyTrap(s *scanner, f *finding, c call) bool {
	if len(c.args) < 2 || c.args[0] == "-" || c.args[0] == "-p" || c.args[0] == "-l" {
		f.add(ReadOnly, "trap only lists or resets")
		return false
	}
	if c.dyn[0] {
		f.add(Unparsable, "the trap's command is computed when the script runs")
		return false
	}
	s.script(c.args[0], s.lang, c.level+1)
	f.add(ReadOnly, "sets a trap")
	return true
}

// classifyKill: a negative pid is a process group, and -1 every process
// of the user; only single processes are signalled behind a checkpoint.
func classifyKill(s *scanner, f *finding, c call) bool {
	args := c.args
	i := 0
	if i < len(args) && (args[i] == "-l" || args[i] == "-L" || args[i] == "--list" || args[i] == "--table") {
		f.add(ReadOnly, "kill -l lists signals")
		return false
	}
	if i < len(args) && (args[i] == "-s" || args[i] == "-n" || args[i] == "--signal") {
		i += 2
	} else if i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "--" {
		i++ // -9, -KILL, -SIGTERM
	}
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			continue
		}
		if c.dyn[i] && !s.childPid(a) {
			f.add(HostEscape, "kill of a pid computed when the script runs, which may be a group or -1")
			return false
		}
		if a == "1" {
			f.add(HostEscape, "kill 1 signals the host's init, never a process of the run")
			return false
		}
		if strings.HasPrefix(a, "-") {
			if a == "-1" {
				f.add(HostEscape, "kill -1 signals every process of the user")
			} else {
				f.add(HostEscape, "kill "+a+" signals a whole process group")
			}
			return false
		}
	}
	f.add(Mutating, "kill signals processes")
	return false
}

// childPid reports a word that can only be one process of the run: the
// shell itself ($$, $BASHPID), a job it started ($!), or a variable only
// ever set to one of those or to a number.
func (s *scanner) childPid(word string) bool {
	if ownPid(word) || isDigits(word) {
		return true
	}
	name, pre := strings.CutPrefix(word, varOpen)
	name, suf := strings.CutSuffix(name, varClose)
	if !pre || !suf || strings.ContainsAny(name, varOpen+varClose) {
		return false
	}
	v := s.vars[name]
	if v == nil || v.unknown {
		return false
	}
	for _, val := range v.values {
		if !ownPid(val) && !isDigits(val) {
			return false
		}
	}
	return true
}

func ownPid(word string) bool {
	for _, n := range []string{"!", "$", "BASHPID"} {
		if word == varOpen+n+varClose {
			return true
		}
	}
	return false
}

// classifyFind is read-only unless it deletes, writes lists, or runs
// commands; commands given to -exec and -ok are classified on their own.
func classifyFind(s *scanner, f *finding, c call) bool {
	args := c.args
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-delete":
			f.add(Destructive, "find -delete removes files")
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			f.add(Mutating, "find "+args[i]+" writes a file")
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			if j > i+1 {
				sub := args[i+1 : j]
				if strings.Contains(sub[0], "{}") {
					s.deny(sub[0], "find -exec runs the files it finds as commands")
				} else {
					s.command(sub, c.dyn[i+1:j], c.level+1)
				}
			}
			i = j
		}
	}
	if len(f.cats) == 0 {
		f.add(ReadOnly, "find only lists")
	}
	return false
}

// classifyTar: listing reads; options that name a program run it.
func classifyTar(s *scanner, f *finding, c call) bool {
	args := c.args
	for i, a := range args {
		name, val, eq := strings.Cut(a, "=")
		switch name {
		case "--to-command", "--checkpoint-action", "--use-compress-program", "--info-script", "--new-volume-script", "--rsh-command", "-I", "-F":
			if !eq && i+1 < len(args) {
				val = args[i+1]
			}
			if name == "--checkpoint-action" {
				_, cmd, ok := strings.Cut(val, "exec=")
				if !ok {
					continue
				}
				val = cmd
			}
			s.script(val, syntaxSh, c.level+1)
			f.add(Unknown, "tar "+name+" runs a command")
		}
	}
	if archive := tarArchive(args); archive != "" && anyRemote([]string{archive}) && !hasArg(args, "--force-local") {
		f.add(Networked, "tar -f host:file reaches a remote host")
	}
	if len(args) > 0 && (strings.Contains(strings.TrimLeft(args[0], "-"), "t") || hasFlag(args, "t", "--list")) &&
		!strings.ContainsAny(strings.TrimLeft(args[0], "-"), "xcru") {
		f.add(ReadOnly, "tar lists an archive")
	} else {
		f.add(Mutating, "tar writes files")
	}
	return false
}

// tarArchive is the archive tar is given: -f X, -cfX, --file=X, or the
// first word of the old style (cf X).
func tarArchive(args []string) string {
	for i, a := range args {
		switch {
		case a == "--file" && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--file="):
			return a[len("--file="):]
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-") || i == 0:
			j := strings.IndexByte(a, 'f')
			if j < 0 {
				continue
			}
			if j+1 < len(a) {
				return a[j+1:]
			}
			if i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return ""
}

// classifyAwk: gawk reaches the network through /inet files, and any awk
// runs commands with system() and pipes.
func classifyAwk(s *scanner, f *finding, c call) bool {
	for _, a := range c.args {
		if strings.Contains(a, "/inet/") || strings.Contains(a, "/inet4/") || strings.Contains(a, "/inet6/") {
			f.add(Networked, f.program+" opens a network connection through /inet")
			return false
		}
	}
	for _, a := range c.args {
		if awkRunsCommands.MatchString(a) {
			f.add(Unparsable, f.program+" runs commands from its program (system(), a pipe to or from a command), which the policy cannot see")
			return false
		}
	}
	f.add(Mutating, f.program+" runs a program that can write files")
	return false
}

// awkRunsCommands matches what in an awk program starts a command:
// system(…), cmd | getline, print … | "cmd", and gawk's coprocess |&.
var awkRunsCommands = regexp.MustCompile(`system\s*\(|\|\s*getline|\|&|\|\s*"`)

// classifySqlite: sqlite3 writes its database; its dot-commands and some
// SQL functions reach past it (.shell, .system, readfile(), …).
func classifySqlite(s *scanner, f *finding, c call) bool {
	for _, a := range c.args {
		if m := sqliteReachesOut.FindString(a); m != "" {
			f.add(Unparsable, "sqlite3 "+strings.TrimSpace(m)+" runs commands or reads and writes files past the database")
			return false
		}
	}
	f.add(Mutating, "sqlite3 writes its database")
	return false
}

var sqliteReachesOut = regexp.MustCompile(`(?i)(^|\s|;)\.(shell|system|load|output|once|import|read|excel|edit|cd)\b|\b(readfile|writefile|edit|load_extension)\s*\(`)

// classifyGetent: getent reads the system's databases; shadow and gshadow
// hold password hashes.
func classifyGetent(s *scanner, f *finding, c call) bool {
	for _, a := range c.args {
		if a == "shadow" || a == "gshadow" {
			f.add(HostEscape, "getent "+a+" reads the host's password hashes")
			return false
		}
	}
	f.add(ReadOnly, "getent reads the system's name databases")
	return false
}

func classifyInterp(s *scanner, f *finding, c call) bool {
	p, args := f.program, c.args
	switch {
	case len(args) == 0:
		f.add(Interactive, p+" without a script starts a REPL")
	case args[0] == "--version" || args[0] == "-V":
		f.add(ReadOnly, p+" prints its version")
	default:
		f.add(Unknown, p+" runs code the policy cannot see into")
	}
	return false
}

// classifyBun: bun installs, runs packages, or runs a script.
func classifyBun(s *scanner, f *finding, c call) bool {
	switch sub := firstWord(c.args); sub {
	case "install", "i", "add", "a", "update", "upgrade", "x", "create", "c", "link", "publish", "outdated", "pm", "init":
		f.add(Networked, "bun "+sub+" reaches the package registry")
	case "--version", "-v", "--help", "help":
		f.add(ReadOnly, "bun "+sub+" only prints")
	case "":
		f.add(Interactive, "bun without a script starts a REPL")
	default:
		f.add(Unknown, "bun runs code the policy cannot see into")
	}
	return false
}

// classifyJS classifies npm, yarn and pnpm.
func classifyJS(s *scanner, f *finding, c call) bool {
	args := c.args
	if hasPrefixArg(args, "--registry") || hasPrefixArg(args, "--userconfig") {
		f.add(Networked, f.program+" --registry reaches a registry")
	}
	sub := firstWord(args)
	switch sub {
	case "", "install", "i", "ci", "add", "update", "upgrade", "up", "publish", "dlx", "exec", "x", "create",
		"init", "outdated", "audit", "login", "fetch", "view", "info", "search", "pack", "unpublish", "deprecate", "dist-tag", "access", "owner", "ping", "whoami":
		if sub == "" && f.program != "yarn" {
			f.add(ReadOnly, f.program+" prints help")
			return false
		}
		if sub == "pack" && localPackSpecs(args) && !f.hasCat([]string{string(Networked)}) {
			f.add(Mutating, f.program+" pack of a local package writes a tarball and runs its scripts")
			return false
		}
		if (sub == "install" || sub == "i" || sub == "ci" || sub == "add") && hasArg(args, "--offline") && !f.hasCat([]string{string(Networked)}) {
			f.add(Mutating, f.program+" "+sub+" --offline installs from the local cache")
			return false
		}
		f.add(Networked, f.program+" "+sub+" reaches the package registry")
	case "config", "c", "set":
		if w := wordAfter(args, sub); w == "get" || w == "list" || w == "ls" || w == "" {
			f.add(ReadOnly, f.program+" config "+w+" only reads")
		} else {
			f.add(HostEscape, f.program+" config "+w+" writes the user's configuration outside the workspace")
		}
	case "ls", "list", "why", "help", "--version", "-v":
		f.add(ReadOnly, f.program+" "+sub+" only reads")
	default:
		f.add(Mutating, f.program+" "+sub+" runs package scripts")
	}
	return false
}

// localPackSpecs reports an npm pack whose specs are all local
// directories (none, ".", "./dir", "../dir"): a registry name would be
// fetched.
func localPackSpecs(args []string) bool {
	seen := false
	for _, a := range args {
		switch {
		case !seen && a == "pack":
			seen = true
		case !seen, strings.HasPrefix(a, "-"):
		case a == "." || a == ".." || strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../"):
		default:
			return false
		}
	}
	return true
}

// wordAfter is the first plain word after the word sub.
func wordAfter(args []string, sub string) string {
	for i, a := range args {
		if a == sub {
			return firstWord(args[i+1:])
		}
	}
	return ""
}

func classifyPip(s *scanner, f *finding, c call) bool {
	p, args := f.program, c.args
	for _, o := range []string{"--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--trusted-host", "--index"} {
		if hasPrefixArg(args, o+"=") || hasArg(args, o) || len(o) == 2 && hasAttached(args, o) {
			f.add(Networked, p+" "+o+" reaches a package index")
			break
		}
	}
	sub := firstWord(args)
	switch sub {
	case "install", "download", "add", "sync", "update", "upgrade", "lock", "create", "tool":
		if !hasArg(args, "--no-index") && !hasArg(args, "--offline") {
			f.add(Networked, p+" "+sub+" fetches packages")
		} else {
			f.add(Mutating, p+" "+sub+" installs local packages")
		}
	case "config":
		if w := wordAfter(args, sub); w == "get" || w == "list" || w == "debug" || w == "" {
			f.add(ReadOnly, p+" config only reads")
		} else {
			f.add(HostEscape, p+" config "+w+" writes the user's configuration outside the workspace")
		}
	case "list", "show", "freeze", "check", "help", "--version", "-V":
		f.add(ReadOnly, p+" "+sub+" only reads")
	default:
		f.add(Mutating, p+" "+sub+" may write")
	}
	return false
}

// hasAttached reports a short option with its value attached (-ihttp://x).
func hasAttached(args []string, opt string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, opt) && len(a) > len(opt) && !strings.HasPrefix(a, "--") {
			return true
		}
	}
	return false
}

func classifyGo(s *scanner, f *finding, c call) bool {
	args := c.args
	switch sub := firstWord(args); sub {
	case "get", "install":
		f.add(Networked, "go "+sub+" fetches modules")
	case "mod":
		if len(args) > 1 && (args[1] == "download" || args[1] == "tidy") {
			f.add(Networked, "go mod "+args[1]+" fetches modules")
		} else {
			f.add(Mutating, "go mod edits module files")
		}
	case "env":
		if hasArg(args, "-w") || hasArg(args, "-u") {
			f.add(HostEscape, "go env -w writes the user's Go configuration outside the workspace")
		} else {
			f.add(ReadOnly, "go env only reads")
		}
	case "version", "list", "doc", "help":
		f.add(ReadOnly, "go "+sub+" only reads")
	default:
		f.add(Mutating, "go "+sub+" builds and writes files")
	}
	return false
}

func classifyCargo(s *scanner, f *finding, c call) bool {
	switch sub := firstWord(c.args); sub {
	case "install", "fetch", "update", "publish", "add", "search", "login":
		f.add(Networked, "cargo "+sub+" reaches the registry")
	case "--version", "version", "help", "tree", "metadata":
		f.add(ReadOnly, "cargo "+sub+" only reads")
	default:
		f.add(Mutating, "cargo "+sub+" builds and writes files")
	}
	return false
}

func classifyApt(s *scanner, f *finding, c call) bool {
	switch firstWord(c.args) {
	case "list", "show", "search", "policy", "info":
		f.add(ReadOnly, f.program+" only reads the package database")
	default:
		f.add(Networked, f.program+" fetches packages")
		f.add(Mutating, f.program+" installs into the system")
	}
	return false
}

// classifyOpenssl: the TLS clients and servers reach the network.
func classifyOpenssl(s *scanner, f *finding, c call) bool {
	switch sub := firstWord(c.args); sub {
	case "s_client", "s_server", "s_time", "ocsp":
		f.add(Networked, "openssl "+sub+" talks to the network")
	case "version", "help", "list":
		f.add(ReadOnly, "openssl "+sub+" only prints")
	default:
		f.add(Mutating, "openssl "+sub+" writes keys and files")
	}
	return false
}

// classifyAlias: an alias's text runs where its name is used.
func classifyAlias(s *scanner, f *finding, c call) bool {
	for i, a := range c.args {
		name, val, ok := strings.Cut(a, "=")
		if !ok {
			continue
		}
		if c.dyn[i] {
			f.add(Unparsable, "alias "+name+" is computed when the script runs")
			return false
		}
		s.aliases[name] = val
		s.script(val, s.lang, c.level+1)
	}
	f.add(ReadOnly, "alias defines a name")
	return false
}

// classifyHash: hash -p makes a name run another program.
func classifyHash(s *scanner, f *finding, c call) bool {
	if hasFlag(c.args, "p", "") {
		f.add(Unparsable, "hash -p makes a name run another program")
	} else {
		f.add(ReadOnly, "hash only remembers program paths")
	}
	return false
}

// classifyMapfile: mapfile -C runs a callback for every line read.
func classifyMapfile(s *scanner, f *finding, c call) bool {
	for i, a := range c.args {
		cb := ""
		switch {
		case a == "-C" && i+1 < len(c.args):
			if c.dyn[i+1] {
				f.add(Unparsable, f.program+" -C runs a callback computed when the script runs")
				return false
			}
			cb = c.args[i+1]
		case strings.HasPrefix(a, "-C") && len(a) > 2:
			cb = a[2:]
		}
		if cb != "" {
			s.script(cb, s.lang, c.level+1)
			f.add(Unknown, f.program+" -C runs a command for each line")
		}
	}
	f.add(ReadOnly, f.program+" reads lines into an array")
	return false
}

func firstWord(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

func hasArg(args []string, want string) bool {
	return contains(args, want)
}

func hasPrefixArg(args []string, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}

// hasFlag reports a short flag (alone or in a cluster like -rf) or its
// long form.
func hasFlag(args []string, short, long string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if long != "" && (a == long || strings.HasPrefix(a, long+"=")) {
			return true
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.Contains(a[1:], short) {
			return true
		}
	}
	return false
}

// anyRemote reports an rsync/scp style host:path argument.
func anyRemote(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if i := strings.IndexByte(a, ':'); i > 0 && !strings.Contains(a[:i], "/") {
			return true
		}
	}
	return false
}
