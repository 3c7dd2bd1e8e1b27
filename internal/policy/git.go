package policy

import "strings"

// gitCommandKeys are configuration keys whose value git runs as a shell
// command (or, for an alias, as a git command).
var gitCommandKeys = []string{"core.fsmonitor", "diff.external", "core.pager", "core.sshcommand", "core.editor",
	"core.hookspath", "core.gitproxy", "core.askpass", "credential.helper", "sequence.editor", "gpg.program",
	"gpg.ssh.program", "uploadpack.packobjectshook", "merge.tool", "diff.tool", "protocol.allow"}

// gitRunsConfig reports a configuration key that makes git run a command.
func gitRunsConfig(key string) bool {
	key = strings.ToLower(key)
	if strings.HasPrefix(key, "alias.") || strings.HasPrefix(key, "pager.") || strings.HasPrefix(key, "filter.") ||
		strings.HasSuffix(key, ".textconv") || strings.HasSuffix(key, ".command") || strings.HasSuffix(key, ".cmd") ||
		strings.HasPrefix(key, "remote.") && (strings.HasSuffix(key, ".uploadpack") || strings.HasSuffix(key, ".receivepack") || strings.HasSuffix(key, ".proxy")) ||
		strings.HasPrefix(key, "url.") || strings.HasPrefix(key, "include") || strings.HasPrefix(key, "http.") {
		return true
	}
	return contains(gitCommandKeys, key)
}

// gitConfig judges one key=value git is given: a command it would run is
// classified as a script; an alias renames a subcommand.
func (s *scanner) gitConfig(f *finding, kv string, aliases map[string]string, level int) {
	key, val, _ := strings.Cut(kv, "=")
	if !gitRunsConfig(key) {
		return
	}
	lk := strings.ToLower(key)
	if name, ok := strings.CutPrefix(lk, "alias."); ok && !strings.HasPrefix(val, "!") {
		aliases[name] = val
		return
	}
	val = strings.TrimPrefix(val, "!")
	f.add(Unknown, "git configuration "+key+" runs a command")
	if val != "" {
		s.script(val, syntaxSh, level+1)
	}
}

// classifyGit classifies a git subcommand, after git's own options.
func classifyGit(s *scanner, f *finding, c call) bool {
	args := c.args
	aliases := map[string]string{}
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		a := args[i]
		switch {
		case a == "-c" && i+1 < len(args):
			i++
			s.gitConfig(f, args[i], aliases, c.level)
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			s.gitConfig(f, a[2:], aliases, c.level)
		case a == "--config-env" || strings.HasPrefix(a, "--config-env="):
			f.add(Unknown, "git --config-env sets configuration from the environment")
			if a == "--config-env" {
				i++
			}
		case a == "-C" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--super-prefix":
			i++
		case strings.HasPrefix(a, "--exec-path="):
			f.add(Unknown, "git --exec-path runs git's programs from another directory")
		}
		i++
	}
	if i >= len(args) {
		f.add(ReadOnly, "git without a subcommand prints help")
		return false
	}
	sub, rest := args[i], args[i+1:]
	for n := 0; n < 8; n++ { // an alias may name another alias
		a, ok := aliases[strings.ToLower(sub)]
		if !ok {
			break
		}
		words := strings.Fields(a)
		if len(words) == 0 {
			break
		}
		sub, rest = words[0], append(words[1:], rest...)
	}
	switch sub {
	case "clone", "fetch", "pull", "push", "ls-remote", "archive", "send-email", "request-pull", "svn", "p4", "remote-http", "remote-https",
		"daemon", "instaweb", "imap-send", "http-fetch", "http-push", "fetch-pack", "send-pack", "upload-pack", "receive-pack":
		if sub == "archive" && !hasPrefixArg(rest, "--remote") {
			f.add(Mutating, "git archive writes an archive")
			return false
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
	case "config":
		gitConfigCmd(s, f, rest, c.level)
	case "status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse", "rev-list",
		"describe", "shortlog", "cat-file", "reflog", "whatchanged", "version", "help", "count-objects",
		"for-each-ref", "show-ref", "merge-base", "name-rev", "check-ignore", "var":
		f.add(ReadOnly, "git "+sub+" only reads")
	case "branch", "tag", "stash":
		if len(rest) == 0 || hasArg(rest, "--list") || hasArg(rest, "-l") || sub == "stash" && firstWord(rest) == "list" {
			f.add(ReadOnly, "git "+sub+" lists")
		} else {
			f.add(Mutating, "git "+sub+" writes the repository")
		}
	default:
		f.add(Mutating, "git "+sub+" writes the repository")
	}
	return false
}

// gitConfigCmd: git config reads, writes the repository's file, or (with
// --global, --system, --file outside) the user's.
func gitConfigCmd(s *scanner, f *finding, rest []string, level int) {
	if hasArg(rest, "--global") || hasArg(rest, "--system") {
		f.add(HostEscape, "git config --global/--system writes configuration outside the workspace")
		return
	}
	var plain []string
	for _, a := range rest {
		if !strings.HasPrefix(a, "-") {
			plain = append(plain, a)
		}
	}
	reading := len(rest) == 0 || hasArg(rest, "--get") || hasArg(rest, "-l") || hasArg(rest, "--list") ||
		hasArg(rest, "--get-all") || hasArg(rest, "--get-regexp") || len(plain) == 1 ||
		len(plain) > 0 && (plain[0] == "get" || plain[0] == "list")
	if reading {
		f.add(ReadOnly, "git config reads")
		return
	}
	if len(plain) > 0 && plain[0] == "set" {
		plain = plain[1:]
	}
	if len(plain) >= 2 && gitRunsConfig(plain[0]) {
		s.gitConfig(f, plain[0]+"="+plain[1], map[string]string{}, level)
	}
	f.add(Mutating, "git config writes the repository's configuration")
}
