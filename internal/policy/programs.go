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
	var wrapped []string
	s.xargsReplace = ""
	hostWhy := ""
	judge := func(words []string) {
		for _, a := range words {
			if why := s.hostPath(a); why != "" && hostWhy == "" {
				hostWhy = "argument " + why + ": " + printable(a)
			}
		}
	}
	defer func() {
		if hostWhy != "" {
			f := newFinding(progName(argv[0]), argv[1:])
			f.add(HostEscape, hostWhy)
			s.found = append(s.found, f)
		}
	}()
	for len(argv) > 0 {
		if !binDir(argv[0]) {
			judge(argv[:1]) // a program named by a path outside the system's bin directories
		}
		w, ok := s.unwrap(argv, dyn, level)
		if !ok {
			break
		}
		judge(argv[1 : len(argv)-len(w.rest)])
		wrapped = append(wrapped, w.prog)
		switch {
		case w.noCommand:
			f := newFinding(w.prog, argv[1:])
			f.add(ReadOnly, w.prog+" runs no command here")
			s.found = append(s.found, f)
			return f
		case w.script != "" || w.scriptDyn:
			if w.scriptDyn {
				s.deny(w.prog, "the script %s runs is computed when the outer script runs", w.prog)
				return nil
			}
			s.script(w.script, syntaxSh, level+1)
			return nil
		case w.replace != nil:
			argv, dyn = w.replace, w.replaceDyn
		default:
			argv, dyn = w.rest, w.dyn
		}
		if len(argv) == 0 {
			if contains(wrapped, "xargs") && w.prog != "xargs" {
				s.deny(w.prog, "the command %s runs comes from xargs's input", w.prog)
				return nil
			}
			f := newFinding(w.prog, nil)
			f.add(ReadOnly, w.prog+" without a command only prints")
			s.found = append(s.found, f)
			return f
		}
		if dyn[0] {
			s.deny(printable(argv[0]), "the command %s runs is computed when the script runs", w.prog)
			return nil
		}
		if s.xargsReplace != "" && strings.Contains(argv[0], s.xargsReplace) {
			s.deny(argv[0], "the command xargs runs comes from its input")
			return nil
		}
	}
	prog := progName(argv[0])
	f := newFinding(prog, argv[1:])
	if declares[prog] {
		for i, a := range argv[1:] {
			if name, val, ok := strings.Cut(a, "="); ok && isAssignment(a) {
				s.assignment(name, val, dyn[i+1])
				if _, runs := runVars[name]; runs {
					continue // judged as what it changes
				}
			}
			judge(argv[i+1 : i+2])
		}
	} else {
		judge(argv[1:])
	}
	if hostWhy != "" {
		f.add(HostEscape, hostWhy)
		hostWhy = ""
	}
	if contains(wrapped, "xargs") && isShell(prog) && (shellScriptFromArgs(argv[1:]) || s.replacedByXargs(argv[1:])) {
		s.deny(prog, "%s -c reads its script from xargs's input", prog)
		return nil
	}
	if s.isSelf(argv[0]) {
		f.add(HostEscape, "runs avfs itself, which acts on vaults, policy and approvals")
	}
	nested := s.program(f, argv[1:], dyn[1:], level)
	if nested && len(f.cats) == 0 {
		return nil
	}
	for _, d := range dyn[1:] {
		if d {
			f.dynamic = true
		}
	}
	if len(f.cats) == 0 {
		f.add(Unknown, "unknown program "+prog+": assumed to write to the workspace")
	}
	for _, w := range wrapped {
		if w == "xargs" {
			f.args = append(f.args, "(arguments from input)")
			f.dynamic = true
		}
	}
	if _, ok := f.cats[ReadOnly]; ok && f.dynamic {
		delete(f.cats, ReadOnly)
		if len(f.cats) == 0 {
			f.add(Unknown, prog+" is given a word known only at run time, so what it reads is not known")
		}
	}
	s.found = append(s.found, f)
	return f
}

// declares are the builtins whose NAME=VALUE arguments are assignments.
var declares = set("export", "local", "declare", "readonly", "typeset")

// replacedByXargs reports an argument that holds xargs -I's replace
// string: xargs puts a line of its input there (xargs -I{} sh -c '{}').
func (s *scanner) replacedByXargs(args []string) bool {
	if s.xargsReplace == "" {
		return false
	}
	for _, a := range args {
		if strings.Contains(a, s.xargsReplace) {
			return true
		}
	}
	return false
}

// shellScriptFromArgs reports sh -c without its script among args (xargs
// appends it from its input).
func shellScriptFromArgs(args []string) bool {
	for i, a := range args {
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
			return i == len(args)-1
		}
	}
	return false
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

// call is what a program's classifier is given.
type call struct {
	args  []string
	dyn   []bool
	level int
}

// A classifier adds the categories of a program's finding, given its
// arguments. It returns true when the program only runs nested commands,
// which were recorded on their own.
type classifier func(s *scanner, f *finding, c call) bool

// is classifies a program that always shows cat.
func is(cat Category, why string) classifier {
	return func(s *scanner, f *finding, c call) bool {
		f.add(cat, f.program+" "+why)
		return false
	}
}

var (
	readOnly    = is(ReadOnly, "only reads")
	mutating    = is(Mutating, "writes files")
	destructive = is(Destructive, "overwrites or removes data")
	networked   = is(Networked, "talks to the network")
	interactive = is(Interactive, "wants a terminal")
	onHost      = is(HostEscape, "acts on the host outside the workspace")
	avfsItself  = is(HostEscape, "is avfs itself, which acts on vaults, policy and approvals")
	otherUser   = is(HostEscape, "runs commands as another user")
	mounts      = is(HostEscape, "mounts or unmounts filesystems, the workspace's own included")
	signalsAll  = is(HostEscape, "signals processes by name, the host's included")
)

// programs is the one table of the default rules: program name → its
// classifier. Names not in it are unknown programs (allowed behind a
// checkpoint); wrappers (wrappers.go) are looked through before it.
var programs map[string]classifier

func init() {
	programs = map[string]classifier{
		// Read-only tools.
		"cat": readOnly, "ls": readOnly, "ll": readOnly, "dir": readOnly, "grep": readOnly, "egrep": readOnly,
		"fgrep": readOnly, "rg": readOnly, "ag": readOnly, "head": readOnly, "tail": readOnly, "wc": readOnly,
		"pwd": readOnly, "echo": readOnly, "printf": readOnly, "true": readOnly, "false": readOnly, ":": readOnly,
		"test": readOnly, "[": readOnly, "[[": readOnly, "stat": readOnly, "file": readOnly, "du": readOnly,
		"df": readOnly, "which": readOnly, "whereis": readOnly, "type": readOnly, "id": readOnly,
		"whoami": readOnly, "groups": readOnly, "date": readOnly, "uname": readOnly, "hostname": readOnly,
		"printenv": readOnly, "basename": readOnly, "dirname": readOnly, "realpath": readOnly,
		"readlink": readOnly, "sort": readOnly, "uniq": readOnly, "cut": readOnly, "tr": readOnly, "diff": readOnly,
		"cmp": readOnly, "comm": readOnly, "md5sum": readOnly, "sha1sum": readOnly, "sha256sum": readOnly,
		"sha512sum": readOnly, "b2sum": readOnly, "cksum": readOnly, "jq": readOnly, "yq": readOnly,
		"tree": readOnly, "nl": readOnly, "od": readOnly, "hexdump": readOnly, "xxd": readOnly, "column": readOnly,
		"seq": readOnly, "sleep": readOnly, "expr": readOnly, "cd": readOnly, "pushd": readOnly, "popd": readOnly,
		"dirs": readOnly, "set": readOnly, "shopt": readOnly, "unset": readOnly, "export": readOnly,
		"local": readOnly, "declare": readOnly, "readonly": readOnly, "typeset": readOnly, "read": readOnly,
		"shift": readOnly, "return": readOnly, "exit": readOnly, "break": readOnly, "continue": readOnly,
		"wait": readOnly, "jobs": readOnly, "umask": readOnly, "getopts": readOnly, "let": readOnly,
		"fold": readOnly, "fmt": readOnly, "paste": readOnly, "join": readOnly, "rev": readOnly, "tac": readOnly,
		"base64": readOnly, "strings": readOnly, "nproc": readOnly, "free": readOnly, "uptime": readOnly,
		"ps": readOnly, "lsof": readOnly, "zcat": readOnly, "zgrep": readOnly, "bzcat": readOnly,
		"xzcat": readOnly, "tput": readOnly, "locale": readOnly, "getconf": readOnly, "yes": readOnly,
		"command": readOnly, "env": readOnly, "xargs": readOnly, "exec": readOnly,
		"alias": classifyAlias, "hash": classifyHash, "mapfile": classifyMapfile, "readarray": classifyMapfile,
		// Programs that write in the workspace.
		"mv": mutating, "cp": mutating, "touch": mutating, "mkdir": mutating, "rmdir": mutating, "ln": mutating,
		"chmod": mutating, "chown": mutating, "chgrp": mutating, "tee": mutating, "install": mutating,
		"patch": mutating, "unzip": mutating, "gzip": mutating, "gunzip": mutating, "bzip2": mutating,
		"xz": mutating, "zip": mutating, "7z": mutating, "make": mutating, "cmake": mutating, "ninja": mutating,
		"mkfifo": mutating, "mknod": mutating, "split": mutating, "csplit": mutating, "awk": classifyAwk,
		"gawk": classifyAwk, "mawk": classifyAwk, "perl": mutating, "gcc": mutating, "cc": mutating, "g++": mutating,
		"clang": mutating, "rustc": mutating, "javac": mutating, "tsc": mutating, "protoc": mutating,
		"sqlite3": classifySqlite, "getent": classifyGetent, "source": mutating, ".": mutating, "rename": mutating, "sync": mutating,
		"rm": classifyRm, "find": classifyFind, "sed": classifySed, "tar": classifyTar, "kill": classifyKill,
		// Bulk overwrites.
		"truncate": destructive, "dd": destructive, "shred": destructive, "wipefs": destructive,
		"fallocate": destructive, "srm": destructive, "mkfs": destructive, "mke2fs": destructive,
		// The network.
		"curl": networked, "wget": networked, "ssh": networked, "scp": networked, "sftp": networked,
		"nc": networked, "ncat": networked, "netcat": networked, "telnet": networked, "ftp": networked,
		"socat": networked, "ping": networked, "dig": networked, "nslookup": networked, "host": networked,
		"aria2c": networked, "httpie": networked, "http": networked, "https": networked, "lftp": networked,
		"whois": networked, "traceroute": networked, "gh": networked, "torsocks": networked,
		"proxychains": networked, "proxychains4": networked,
		"rsync": classifyRsync, "git": classifyGit, "openssl": classifyOpenssl,
		"npm": classifyJS, "yarn": classifyJS, "pnpm": classifyJS, "bun": classifyBun,
		"npx": is(Networked, "fetches and runs a package from the registry"), "pnpx": is(Networked, "fetches and runs a package from the registry"),
		"bunx": is(Networked, "fetches and runs a package from the registry"),
		"pip":  classifyPip, "pip3": classifyPip, "uv": classifyPip, "pipx": classifyPip, "poetry": classifyPip,
		"conda": classifyPip, "go": classifyGo, "cargo": classifyCargo,
		"apt": classifyApt, "apt-get": classifyApt, "yum": classifyApt, "dnf": classifyApt, "apk": classifyApt,
		"brew": classifyApt, "snap": classifyApt,
		// The host, other users and avfs itself.
		"avfs": avfsItself, "agentvfs": avfsItself,
		"mount": mounts, "umount": mounts, "fusermount": mounts, "fusermount3": mounts, "pivot_root": mounts,
		"switch_root": mounts, "losetup": onHost,
		"sudo": otherUser, "doas": otherUser, "su": otherUser, "runuser": otherUser, "pkexec": otherUser,
		"newgrp": otherUser,
		"pkill":  signalsAll, "killall": signalsAll, "killall5": signalsAll, "skill": signalsAll, "snice": signalsAll,
		"docker": onHost, "podman": onHost, "kubectl": onHost, "systemctl": onHost, "service": onHost,
		"systemd-run": onHost, "chroot": onHost, "nsenter": onHost, "unshare": onHost, "insmod": onHost,
		"rmmod": onHost, "modprobe": onHost, "reboot": onHost, "shutdown": onHost, "poweroff": onHost,
		"halt": onHost, "useradd": onHost, "userdel": onHost, "usermod": onHost, "passwd": onHost,
		"crontab": onHost, "at": onHost, "iptables": onHost, "nft": onHost, "ip": onHost, "ifconfig": onHost,
		"gdb": is(HostEscape, "can attach to and drive other processes"),
		// Terminals.
		"vim": interactive, "vi": interactive, "nvim": interactive, "nano": interactive, "emacs": interactive,
		"less": interactive, "more": interactive, "most": interactive, "top": interactive, "htop": interactive,
		"btop": interactive, "man": interactive, "tmux": interactive, "screen": interactive, "ed": interactive,
		"mc": interactive, "info": interactive, "psql": interactive, "mysql": interactive,
		"redis-cli": interactive, "mongo": interactive, "mongosh": interactive,
		// Code the policy cannot see into.
		"eval":   is(Unparsable, "runs text built at run time"),
		"trap":   classifyTrap,
		"python": classifyInterp, "python3": classifyInterp, "python2": classifyInterp, "node": classifyInterp,
		"nodejs": classifyInterp, "ruby": classifyInterp, "irb": classifyInterp, "php": classifyInterp,
		"lua": classifyInterp, "deno": classifyInterp, "ghci": classifyInterp, "R": classifyInterp,
		"julia": classifyInterp, "tclsh": classifyInterp, "pypy": classifyInterp, "pypy3": classifyInterp,
		"sh": classifyShell, "bash": classifyShell, "dash": classifyShell, "zsh": classifyShell,
		"ksh": classifyShell, "mksh": classifyShell, "ash": classifyShell, "fish": classifyShell,
	}
}

func isShell(prog string) bool { _, ok := shellLang(prog); return ok || prog == "fish" }

// program adds the categories of f's program, given its arguments. It
// returns true when the program only runs nested commands, which were
// recorded on their own.
func (s *scanner) program(f *finding, args []string, dyn []bool, level int) bool {
	p := f.program
	c := call{args: args, dyn: dyn, level: level}
	if fn, ok := programs[p]; ok {
		return fn(s, f, c)
	}
	switch {
	case strings.HasPrefix(p, "mkfs."):
		f.add(Destructive, p+" formats a device")
	case strings.HasPrefix(p, "fusermount"):
		return mounts(s, f, c)
	}
	return false
}
