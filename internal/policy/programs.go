package policy

import (
	"path"
	"strings"
)

// command classifies one simple command (argv with, for each word, whether
// it is only known at run time), looking through wrappers to the program
// that really runs. It returns the finding it recorded, or nil when the
// command only runs a nested script (whose commands are recorded instead).
func (s *scanner) command(argv []string, dyn []bool, level int) *finding {
	progAt := map[int]bool{}
	start := 0
	var wrappers []string
	for {
		progAt[start] = true
		prog := progName(argv[start])
		next, ok := unwrap(prog, argv[start:])
		if !ok || start+next >= len(argv) {
			break
		}
		wrappers = append(wrappers, prog)
		start += next
		if dyn[start] {
			s.deny(printable(argv[start]), "the command %s runs is computed when the script runs", prog)
			return nil
		}
	}
	prog := progName(argv[start])
	f := newFinding(prog, argv[start+1:])
	for i, a := range argv {
		if progAt[i] && binDir(a) {
			continue // a program named by its path, as /usr/bin/curl
		}
		if why := s.hostPath(a); why != "" {
			f.add(HostEscape, "argument "+why+": "+printable(a))
			break
		}
	}
	nested := s.program(f, argv[start+1:], dyn[start+1:], level)
	if nested && len(f.cats) == 0 {
		return nil
	}
	if len(f.cats) == 0 {
		f.add(Unknown, "unknown program "+prog+": assumed to write to the workspace")
	}
	for _, w := range wrappers {
		if w == "xargs" {
			f.args = append(f.args, "(arguments from input)")
		}
	}
	s.found = append(s.found, f)
	return f
}

// binDir reports a program path in one of the system's program
// directories: running it is running the program of that name.
func binDir(word string) bool {
	switch path.Dir(path.Clean(word)) {
	case "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin":
		return true
	}
	return !strings.Contains(word, "/")
}

// progName is the program a command word names: the base name of a path.
func progName(word string) string {
	if strings.Contains(word, "/") {
		return path.Base(word)
	}
	return word
}

// unwrap returns, for a wrapper program, the offset in argv of the command
// it runs. ok is false when prog is not a wrapper.
func unwrap(prog string, argv []string) (int, bool) {
	i := 1
	skip := func(withValue map[string]bool) {
		for i < len(argv) && strings.HasPrefix(argv[i], "-") && argv[i] != "-" {
			a := argv[i]
			i++
			if a == "--" {
				return
			}
			if withValue[a] && i < len(argv) {
				i++
			}
		}
	}
	switch prog {
	case "env":
		skip(map[string]bool{"-u": true, "--unset": true, "-C": true, "--chdir": true, "-S": true, "--split-string": true})
		for i < len(argv) && strings.Contains(argv[i], "=") && !strings.HasPrefix(argv[i], "=") {
			i++
		}
	case "sudo", "doas":
		skip(map[string]bool{"-u": true, "-g": true, "-h": true, "-p": true, "-C": true, "-D": true,
			"-r": true, "-t": true, "-U": true, "-T": true, "-R": true})
	case "nice":
		skip(map[string]bool{"-n": true, "--adjustment": true})
	case "ionice":
		skip(map[string]bool{"-c": true, "-n": true, "-p": true})
	case "timeout":
		skip(map[string]bool{"-s": true, "--signal": true, "-k": true, "--kill-after": true})
		i++ // the duration
	case "xargs":
		skip(map[string]bool{"-a": true, "-d": true, "-E": true, "-e": true, "-I": true, "-i": false,
			"-L": true, "-l": false, "-n": true, "-P": true, "-s": true, "--arg-file": true,
			"--delimiter": true, "--max-args": true, "--max-procs": true, "--max-lines": true})
	case "busybox", "nohup", "setsid", "builtin", "unbuffer", "chronic":
	case "command":
		skip(nil)
		if hasArg(argv[1:i], "-v") || hasArg(argv[1:i], "-V") {
			return 0, false // only looks the name up
		}
	case "exec":
		skip(map[string]bool{"-a": true})
	case "stdbuf":
		skip(map[string]bool{"-i": true, "-o": true, "-e": true})
	case "time":
		skip(map[string]bool{"-f": true, "--format": true, "-o": true, "--output": true})
	default:
		return 0, false
	}
	return i, true
}

// Program tables of the default rules.
var (
	readOnlyProgs = set("cat", "ls", "ll", "dir", "grep", "egrep", "fgrep", "rg", "ag", "head", "tail", "wc", "pwd",
		"echo", "printf", "true", "false", ":", "test", "[", "[[", "stat", "file", "du", "df", "which", "whereis",
		"type", "id", "whoami", "groups", "date", "uname", "hostname", "printenv", "basename", "dirname", "realpath",
		"readlink", "sort", "uniq", "cut", "tr", "diff", "cmp", "comm", "md5sum", "sha1sum", "sha256sum",
		"sha512sum", "b2sum", "cksum", "jq", "yq", "tree", "nl", "od", "hexdump", "xxd", "column", "seq", "sleep",
		"expr", "cd", "pushd", "popd", "dirs", "set", "shopt", "unset", "export", "local", "declare", "readonly",
		"typeset", "read", "shift", "return", "exit", "break", "continue", "wait", "jobs", "hash", "umask",
		"getopts", "let", "fold", "fmt", "paste", "join", "rev", "tac", "base64", "strings", "nproc", "free",
		"uptime", "ps", "lsof", "env", "command", "exec", "xargs", "trap", "zcat", "zgrep", "bzcat", "xzcat", "tput", "locale", "getconf", "yes")
	mutatingProgs = set("mv", "cp", "touch", "mkdir", "rmdir", "ln", "chmod", "chown", "chgrp", "tee", "install",
		"patch", "unzip", "gzip", "gunzip", "bzip2", "xz", "zip", "7z", "make", "cmake", "ninja", "mkfifo",
		"mknod", "split", "csplit", "kill", "pkill", "killall", "awk", "gawk", "mawk", "perl", "gcc", "cc", "g++",
		"clang", "rustc", "javac", "tsc", "protoc", "sqlite3", "source", ".", "rename", "sync")
	destructiveProgs = set("truncate", "dd", "shred", "wipefs", "fallocate", "srm")
	networkProgs     = set("curl", "wget", "ssh", "scp", "sftp", "nc", "ncat", "netcat", "telnet", "ftp", "socat",
		"ping", "dig", "nslookup", "host", "aria2c", "httpie", "http", "https", "lftp", "whois", "traceroute", "gh")
	hostProgs = set("docker", "podman", "kubectl", "systemctl", "service", "mount", "umount", "chroot", "nsenter",
		"unshare", "insmod", "rmmod", "modprobe", "reboot", "shutdown", "poweroff", "halt", "useradd", "userdel",
		"usermod", "passwd", "crontab", "iptables", "nft", "ip", "ifconfig", "losetup", "su", "sudo", "doas")
	interactiveProgs = set("vim", "vi", "nvim", "nano", "emacs", "less", "more", "most", "top", "htop", "btop", "man",
		"watch", "tmux", "screen", "ed", "mc", "info", "psql", "mysql", "redis-cli", "mongo", "mongosh")
	interpreters = set("python", "python3", "python2", "node", "nodejs", "ruby", "irb", "php", "lua", "deno",
		"bun", "ghci", "R", "julia", "tclsh", "pypy", "pypy3")
	shells = set("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func isShell(prog string) bool { return shells[prog] }

// program adds the categories of f's program, given its arguments. It
// returns true when the program only runs nested commands, which were
// recorded on their own.
func (s *scanner) program(f *finding, args []string, dyn []bool, level int) bool {
	p := f.program
	switch {
	case p == "eval":
		f.add(Unparsable, "eval runs text built at run time")
	case shells[p]:
		return s.shell(f, args, dyn, level)
	case p == "trap" && len(args) > 1 && args[0] != "-":
		if dyn[0] {
			f.add(Unparsable, "the trap's command is computed when the script runs")
			return false
		}
		s.script(args[0], level+1)
		f.add(ReadOnly, "sets a trap")
		return true
	case p == "git":
		s.git(f, args)
	case p == "rm":
		if hasFlag(args, "r", "--recursive") || hasFlag(args, "f", "--force") || hasFlag(args, "R", "") {
			f.add(Destructive, "rm -r/-f removes files in bulk")
		} else {
			f.add(Mutating, "rm removes files")
		}
	case p == "find":
		return s.find(f, args, level)
	case p == "sed":
		if hasFlag(args, "i", "--in-place") || hasPrefixArg(args, "--in-place") {
			f.add(Mutating, "sed -i edits files in place")
		} else {
			f.add(ReadOnly, "sed without -i only prints")
		}
	case p == "tar":
		if len(args) > 0 && (strings.Contains(strings.TrimLeft(args[0], "-"), "t") || hasFlag(args, "t", "--list")) &&
			!strings.ContainsAny(strings.TrimLeft(args[0], "-"), "xcru") {
			f.add(ReadOnly, "tar lists an archive")
		} else {
			f.add(Mutating, "tar writes files")
		}
	case p == "mkfs" || strings.HasPrefix(p, "mkfs.") || p == "mke2fs":
		f.add(Destructive, p+" formats a device")
	case p == "rsync":
		if anyRemote(args) {
			f.add(Networked, "rsync to or from a remote host")
		} else {
			f.add(Mutating, "rsync writes files")
		}
	case p == "npm" || p == "yarn" || p == "pnpm" || p == "bun" && len(args) > 0 && args[0] == "install":
		s.jsPackages(f, args)
	case p == "pip" || p == "pip3" || p == "uv" || p == "pipx" || p == "poetry" || p == "conda":
		sub := firstWord(args)
		switch sub {
		case "install", "download", "add", "sync", "update", "upgrade", "lock", "create":
			if !hasArg(args, "--no-index") && !hasArg(args, "--offline") {
				f.add(Networked, p+" "+sub+" fetches packages")
			} else {
				f.add(Mutating, p+" "+sub+" installs local packages")
			}
		case "list", "show", "freeze", "check", "help", "--version", "-V":
			f.add(ReadOnly, p+" "+sub+" only reads")
		default:
			f.add(Mutating, p+" "+sub+" may write")
		}
	case p == "go":
		switch sub := firstWord(args); sub {
		case "get", "install":
			f.add(Networked, "go "+sub+" fetches modules")
		case "mod":
			if len(args) > 1 && (args[1] == "download" || args[1] == "tidy") {
				f.add(Networked, "go mod "+args[1]+" fetches modules")
			} else {
				f.add(Mutating, "go mod edits module files")
			}
		case "version", "env", "list", "doc", "help":
			f.add(ReadOnly, "go "+sub+" only reads")
		default:
			f.add(Mutating, "go "+sub+" builds and writes files")
		}
	case p == "cargo":
		switch sub := firstWord(args); sub {
		case "install", "fetch", "update", "publish", "add", "search", "login":
			f.add(Networked, "cargo "+sub+" reaches the registry")
		case "--version", "version", "help", "tree", "metadata":
			f.add(ReadOnly, "cargo "+sub+" only reads")
		default:
			f.add(Mutating, "cargo "+sub+" builds and writes files")
		}
	case p == "apt" || p == "apt-get" || p == "yum" || p == "dnf" || p == "apk" || p == "brew" || p == "snap":
		switch firstWord(args) {
		case "list", "show", "search", "policy", "info":
			f.add(ReadOnly, p+" only reads the package database")
		default:
			f.add(Networked, p+" fetches packages")
			f.add(Mutating, p+" installs into the system")
		}
	case interpreters[p]:
		if len(args) == 0 {
			f.add(Interactive, p+" without a script starts a REPL")
		} else if args[0] == "--version" || args[0] == "-V" {
			f.add(ReadOnly, p+" prints its version")
		} else {
			f.add(Unknown, p+" runs code the policy cannot see into")
		}
	case p == "echo" || p == "printf":
		f.add(ReadOnly, p+" only prints")
	case hostProgs[p]:
		f.add(HostEscape, p+" acts on the host outside the workspace")
	case networkProgs[p]:
		f.add(Networked, p+" talks to the network")
	case destructiveProgs[p]:
		f.add(Destructive, p+" overwrites or removes data")
	case interactiveProgs[p]:
		f.add(Interactive, p+" wants a terminal")
	case mutatingProgs[p]:
		f.add(Mutating, p+" writes files")
	case readOnlyProgs[p]:
		f.add(ReadOnly, p+" only reads")
	}
	return false
}

// shell handles sh/bash/...: -c SCRIPT is parsed; a script file cannot be
// seen into; a bare shell runs whatever arrives on its input.
func (s *scanner) shell(f *finding, args []string, dyn []bool, level int) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
			f.add(Unknown, f.program+" runs the script file "+printable(a)+", which the policy cannot see into")
			return false
		}
		if strings.HasPrefix(a, "--") {
			if a == "--version" || a == "--help" {
				f.add(ReadOnly, f.program+" "+a)
				return false
			}
			continue
		}
		if strings.Contains(a, "c") && !strings.HasPrefix(a, "+") {
			if i+1 >= len(args) {
				f.add(Unparsable, f.program+" -c without a script")
				return false
			}
			if dyn[i+1] {
				f.add(Unparsable, f.program+" -c runs a script computed when the outer script runs")
				return false
			}
			s.script(args[i+1], level+1)
			return true
		}
		if a == "-o" || a == "+o" || a == "-O" || a == "+O" {
			i++
		}
	}
	f.add(Unparsable, f.program+" reads commands from its input, which the policy cannot see")
	return false
}

// git classifies a git subcommand, after git's own options.
func (s *scanner) git(f *finding, args []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-C" || args[i] == "-c" {
			i++
		}
		i++
	}
	if i >= len(args) {
		f.add(ReadOnly, "git without a subcommand prints help")
		return
	}
	sub, rest := args[i], args[i+1:]
	switch sub {
	case "clone", "fetch", "pull", "push", "ls-remote", "archive":
		if sub == "archive" && !hasPrefixArg(rest, "--remote") {
			f.add(Mutating, "git archive writes an archive")
			return
		}
		f.add(Networked, "git "+sub+" talks to a remote")
	case "submodule":
		if w := firstWord(rest); w == "update" || w == "add" || w == "sync" || w == "foreach" {
			f.add(Networked, "git submodule "+w+" talks to remotes")
		} else {
			f.add(ReadOnly, "git submodule status only reads")
		}
	case "remote":
		if w := firstWord(rest); w == "update" || w == "prune" || w == "show" && !hasArg(rest, "-n") {
			f.add(Networked, "git remote "+w+" talks to remotes")
		} else if w == "" || w == "-v" || w == "get-url" {
			f.add(ReadOnly, "git remote lists remotes")
		} else {
			f.add(Mutating, "git remote "+w+" edits the configuration")
		}
	case "reset":
		if hasArg(rest, "--hard") {
			f.add(Destructive, "git reset --hard discards changes")
		} else {
			f.add(Mutating, "git reset moves the index")
		}
	case "clean":
		if hasFlag(rest, "f", "--force") {
			f.add(Destructive, "git clean -f deletes untracked files")
		} else {
			f.add(ReadOnly, "git clean without -f only reports")
		}
	case "status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse", "rev-list",
		"describe", "shortlog", "cat-file", "reflog", "whatchanged", "version", "help", "count-objects",
		"for-each-ref", "show-ref", "merge-base", "name-rev", "check-ignore", "var":
		f.add(ReadOnly, "git "+sub+" only reads")
	case "branch", "tag", "stash", "config":
		if len(rest) == 0 || hasArg(rest, "--list") || hasArg(rest, "-l") || sub == "stash" && firstWord(rest) == "list" ||
			sub == "config" && (hasArg(rest, "--get") || hasArg(rest, "-l") || hasArg(rest, "--list")) {
			f.add(ReadOnly, "git "+sub+" lists")
		} else {
			f.add(Mutating, "git "+sub+" writes the repository")
		}
	default:
		f.add(Mutating, "git "+sub+" writes the repository")
	}
}

// find is read-only unless it deletes, writes lists, or runs commands;
// commands given to -exec and -ok are classified on their own.
func (s *scanner) find(f *finding, args []string, level int) bool {
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
				s.command(sub, make([]bool, len(sub)), level+1)
			}
			i = j
		}
	}
	if len(f.cats) == 0 {
		f.add(ReadOnly, "find only lists")
	}
	return false
}

// jsPackages classifies npm, yarn and pnpm.
func (s *scanner) jsPackages(f *finding, args []string) {
	sub := firstWord(args)
	switch sub {
	case "", "install", "i", "ci", "add", "update", "upgrade", "up", "publish", "dlx", "exec", "x", "create",
		"init", "outdated", "audit", "login", "fetch":
		if sub == "" && f.program != "yarn" {
			f.add(ReadOnly, f.program+" prints help")
			return
		}
		f.add(Networked, f.program+" "+sub+" reaches the package registry")
	case "ls", "list", "view", "info", "why", "help", "--version", "-v", "config":
		f.add(ReadOnly, f.program+" "+sub+" only reads")
	default:
		f.add(Mutating, f.program+" "+sub+" runs package scripts")
	}
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
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
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
