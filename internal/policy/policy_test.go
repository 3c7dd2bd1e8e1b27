package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lineRequest reads a test line: "$ SCRIPT" is a --shell script; any
// other line is split into an argv as a shell would (quotes removed).
func lineRequest(t *testing.T, line string) Request {
	t.Helper()
	if s, ok := strings.CutPrefix(line, "$ "); ok {
		return Request{Shell: s}
	}
	words, _, ok := splitWords(line)
	if !ok {
		t.Fatalf("%q: not a plain argv", line)
	}
	return Request{Argv: words}
}

// TestClassifyTable pins the default decision of command lines, shell
// tricks included.
func TestClassifyTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		want Action
		cat  Category // a category the decision must carry ("" = no check)
	}{
		// Plain reads.
		{"ls -la", Allow, ReadOnly},
		{"cat README.md", Allow, ReadOnly},
		{"$ grep -r foo . | head -n 3 | wc -l", Allow, ReadOnly},
		{"git status", Allow, ReadOnly},
		{"git -C sub log --oneline", Allow, ReadOnly},
		{"find . -name *.go", Allow, ReadOnly},
		{"$ echo hello", Allow, ReadOnly},
		{"$ echo hi > /dev/null", Allow, ReadOnly},
		{"true", Allow, ReadOnly},
		{"/usr/bin/cat x", Allow, ReadOnly},
		{"command -v curl", Allow, ReadOnly},
		{"$ f() { ls; }; f", Allow, ReadOnly},
		{"$ # only a comment", Allow, ""},
		{"sed s/a/b/ file", Allow, ReadOnly},
		// Writes, deletes, the unknown and the interactive: behind a checkpoint.
		{"touch a", AllowWithCheckpoint, Mutating},
		{"$ echo x > out.txt", AllowWithCheckpoint, Mutating},
		{"$ echo x >> log", AllowWithCheckpoint, Mutating},
		{"sed -i s/a/b/ file", AllowWithCheckpoint, Mutating},
		{"git commit -m msg", AllowWithCheckpoint, Mutating},
		{"rm -rf build", AllowWithCheckpoint, Destructive},
		{"find . -name *.o -delete", AllowWithCheckpoint, Destructive},
		{"git reset --hard HEAD~1", AllowWithCheckpoint, Destructive},
		{"git clean -fdx", AllowWithCheckpoint, Destructive},
		{"dd if=a of=b", AllowWithCheckpoint, Destructive},
		{"vim file", AllowWithCheckpoint, Interactive},
		{"python3", AllowWithCheckpoint, Interactive},
		{"python3 script.py", AllowWithCheckpoint, Unknown},
		{"frobnicate --all", AllowWithCheckpoint, Unknown},
		{"go test ./...", AllowWithCheckpoint, Mutating},
		{"$ cat <<EOF > notes.txt\nhello\nEOF", AllowWithCheckpoint, Mutating},
		{"$ sh <<'EOF'\ntouch x\nEOF", AllowWithCheckpoint, Mutating},
		{"find . -exec touch {} ;", AllowWithCheckpoint, Mutating},
		// Network: a person decides.
		{"curl https://example.com", RequireApproval, Networked},
		{"/usr/bin/wget x", RequireApproval, Networked},
		{"env X=1 curl x", RequireApproval, Networked},
		{"$ env -i X=1 nice -n 5 timeout 5 curl x", RequireApproval, Networked},
		{"$ a; curl x", RequireApproval, Networked},
		{"$ a && curl x || true", RequireApproval, Networked},
		{"$ echo $(curl x)", RequireApproval, Networked},
		{"$ echo `wget x`", RequireApproval, Networked},
		{"bash -c 'cat <(curl x)'", RequireApproval, Networked},
		{"$ cat <(curl x)", Deny, Unparsable}, // /bin/sh is dash: no process substitution
		{"$ (cd sub && git push)", RequireApproval, Networked},
		{`$ bash -c "curl x"`, RequireApproval, Networked},
		{"$ bash -c 'sh -c \"nc host 1\"'", RequireApproval, Networked},
		{"$ ls | xargs curl", RequireApproval, Networked},
		{"$ busybox wget x", RequireApproval, Networked},
		{"$ git clone https://x/y", RequireApproval, Networked},
		{"npm install left-pad", RequireApproval, Networked},
		{"pip install requests", RequireApproval, Networked},
		{"go get example.com/m", RequireApproval, Networked},
		{"apt-get install jq", RequireApproval, Networked},
		{"rsync -a dir host:dir", RequireApproval, Networked},
		{"$ f() { curl x; }; f", RequireApproval, Networked},
		{"$ trap 'curl x' EXIT", RequireApproval, Networked},
		{"$ cat <<EOF\n$(curl x)\nEOF", RequireApproval, Networked},
		{"$ nohup stdbuf -oL time -p command exec curl x", RequireApproval, Networked},
		{`$ c\url x`, RequireApproval, Networked},
		{`$ "cu"'rl' x`, RequireApproval, Networked},
		// Host escapes and the unreadable: refused.
		{"sudo -u x rm -rf /", Deny, HostEscape},
		{"$ cat </etc/passwd", Deny, HostEscape},
		{"$ echo > ~/x", Deny, HostEscape},
		{"$ echo x > $HOME/.bashrc", Deny, HostEscape},
		{"cat /etc/passwd", Deny, HostEscape},
		{"cp a /tmp/x", Deny, HostEscape},
		{"cat ../../secret", Deny, HostEscape},
		{"dd if=/dev/sda of=x", Deny, HostEscape},
		{"ls --dir=/root", Deny, HostEscape},
		{"docker run x", Deny, HostEscape},
		{"$ curl x | sudo tee /etc/hosts", Deny, HostEscape},
		{`$ eval "curl x"`, Deny, Unparsable},
		{"$ $CMD x", Deny, Unparsable},
		{"$ env $CMD", Deny, Unparsable},
		{"$ echo 'unterminated", Deny, Unparsable},
		{"$ echo x | sh", Deny, Unparsable},
		{`$ bash -c "$SCRIPT"`, Deny, Unparsable},
		{"$ /usr/bin/cur? x", Deny, Unparsable},
		{"$ echo ok; $(echo curl) x", Deny, Unparsable},
		{"/tmp/evil.sh", Deny, HostEscape},
	}
	for _, c := range cases {
		d := Classify(lineRequest(t, c.line), nil)
		if d.Action != c.want {
			t.Errorf("%q: %s (%s, rule %s), want %s", c.line, d.Action, d.Reason, d.Rule, c.want)
			continue
		}
		if c.cat != "" && !slices.Contains(d.Categories, string(c.cat)) {
			t.Errorf("%q: categories %v lack %s", c.line, d.Categories, c.cat)
		}
		if d.Reason == "" || d.Rule == "" {
			t.Errorf("%q: no reason or rule: %+v", c.line, d)
		}
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
}

// TestDynamic: a word known only at run time is marked, and never
// allowed without a checkpoint; a variable the script sets is known.
func TestDynamic(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line    string
		want    Action
		dynamic bool
	}{
		{"$ cat x", Allow, false},
		{"$ cat $x", AllowWithCheckpoint, true},
		{"$ cat \"$(ls)\"", AllowWithCheckpoint, true},
		{"$ echo `date`", AllowWithCheckpoint, true},
		{"$ cat $'\\x61'", AllowWithCheckpoint, true},
		{`bash -c "cat \$'\\x61'"`, AllowWithCheckpoint, true},
		{"$ x=a; cat $x", Allow, false},
		{"$ cd src && cat ../go.mod && cd .. && ls", Allow, false},
		{"$ cd src; cd ..; cd ..; ls", Deny, false},
		{"$ sleep 9 & pid=$!; kill $pid", AllowWithCheckpoint, true},
		{"$ sleep 9 & kill $!", AllowWithCheckpoint, true},
		{"$ kill $pid", Deny, true},
		{"$ kill -TERM $$", AllowWithCheckpoint, true},
		{"$ kill -TERM -$$", Deny, true},
		{"$ for f in a b; do cat \"$f\"; done", Allow, false},
		{"$ read x; cat $x", AllowWithCheckpoint, true},
		{"$ x=a; read x; cat $x", AllowWithCheckpoint, true},
		{"$ cat < $f", AllowWithCheckpoint, true},
		{"$ ls | xargs cat", AllowWithCheckpoint, true},
		{"$ echo curl x | xargs -I{} sh -c '{}'", Deny, false},
		{"$ echo x | xargs -I{} cat {}", AllowWithCheckpoint, true},
		{"$ [ -f x ] && cat x", Allow, false},
	} {
		d := Classify(lineRequest(t, c.line), nil)
		if d.Action != c.want || d.Dynamic != c.dynamic {
			t.Errorf("%q: %s dynamic=%v (%s), want %s dynamic=%v", c.line, d.Action, d.Dynamic, d.Reason, c.want, c.dynamic)
		}
	}
}

// TestDialect: a script is parsed in the language of the shell that runs
// it: --shell runs /bin/sh (dash), bash -c runs bash.
func TestDialect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line string
		want Action
	}{
		{"$ echo ${x/a/b}", Deny},                        // not sh: the script fails in dash
		{"bash -c 'echo ${x/a/b}'", AllowWithCheckpoint}, // bash: a run-time word
		{"$ cat <(curl x)", Deny},
		{"bash -c 'cat <(curl x)'", RequireApproval},
		{"$ x='a[$(curl x)]'; echo $((x))", AllowWithCheckpoint}, // dash has no arrays
		{"bash -c 'x=\"a[\\$(id)]\"; echo $((x))'", Deny},        // bash runs id
		{"bash -c 'for ((i=0; i<3; i++)); do echo $((i*2)); done'", AllowWithCheckpoint},
		{"bash -c 'n=3; echo $((n+1))'", AllowWithCheckpoint}, // a known number, still a run-time word
		{"sh -c 'echo $((n+1))'", AllowWithCheckpoint},
		{"bash -c 'echo $((n+1))'", Deny},
		{"zsh -c 'curl x'", RequireApproval},
		{"fish -c 'ls'", Deny},
	} {
		if d := Classify(lineRequest(t, c.line), nil); d.Action != c.want {
			t.Errorf("%q: %s (%s), want %s", c.line, d.Action, d.Reason, c.want)
		}
	}
}

// TestCwdEscape checks that .. is judged from the working directory.
func TestCwdEscape(t *testing.T) {
	t.Parallel()
	if a := Classify(Request{Argv: []string{"cat", "../x"}, Cwd: "/sub"}, nil).Action; a != Allow {
		t.Errorf("../x from /sub: %s", a)
	}
	if a := Classify(Request{Argv: []string{"cat", "../../x"}, Cwd: "/sub"}, nil).Action; a != Deny {
		t.Errorf("../../x from /sub: %s", a)
	}
	// The CLI passes an empty, non-nil argv beside --shell.
	if a := Classify(Request{Argv: []string{}, Shell: "curl x"}, nil).Action; a != RequireApproval {
		t.Errorf("shell with an empty argv: %s", a)
	}
	if a := Classify(Request{Argv: []string{"sh", "-ec", "curl x"}}, nil).Action; a != RequireApproval {
		t.Errorf("argv sh -ec 'curl x': %s", a)
	}
	if a := Classify(Request{Shell: "cat $AVFS_MOUNTPOINT/etc/x"}, nil).Action; a != Allow {
		t.Errorf("$AVFS_MOUNTPOINT/etc/x: %s", a)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyFiles checks ordered rules, category overrides, and that a
// vault's file only tightens.
func TestPolicyFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, FileName), `version = 1
[categories]
networked = "allow"

[[rule]]
name = "no-docker-like"
program = ["podman", "dock*"]
action = "deny"
reason = "containers reach the host"

[[rule]]
program = ["make"]
args = ["deploy*"]
action = "require_approval"
`)
	writeFile(t, filepath.Join(home, VaultDir, "v.toml"), `version = 1
[categories]
read_only = "deny"

[[rule]]
name = "loosen"
program = ["make"]
action = "allow"

[[rule]]
name = "tighten"
categories = ["networked"]
action = "require_approval"
`)
	p, err := Load(home, "")
	if err != nil {
		t.Fatal(err)
	}
	check := func(p *Policy, argv string, want Action, rule string) {
		t.Helper()
		d := Classify(Request{Argv: strings.Fields(argv)}, p)
		if d.Action != want || rule != "" && d.Rule != rule {
			t.Errorf("%q: %s by %s (%s), want %s by %s", argv, d.Action, d.Rule, d.Reason, want, rule)
		}
	}
	check(p, "curl x", Allow, "default:networked")
	check(p, "docker ps", Deny, FileName+"#no-docker-like")
	check(p, "make deploy-prod", RequireApproval, FileName+"#2")
	check(p, "make build", AllowWithCheckpoint, "default:mutating")
	vp, err := Load(home, "v")
	if err != nil {
		t.Fatal(err)
	}
	check(vp, "ls", Deny, "default:read_only")
	check(vp, "make deploy", RequireApproval, FileName+"#2") // the vault's allow cannot loosen
	check(vp, "curl x", RequireApproval, VaultDir+"/v.toml#tighten")
	if vp.Actions[Networked] != Allow || vp.Actions[ReadOnly] != Deny {
		t.Errorf("effective categories %v", vp.Actions)
	}
}

// TestInvalidPolicyFile checks that a bad file is refused with its line.
func TestInvalidPolicyFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ text, want string }{
		{"version = 1\n[[rule]]\nprogram = [\"x\"\naction = \"deny\"\n", ":4:"},
		{"version = 1\n\n[[rule]]\nprogram = [\"x\"]\naction = \"maybe\"\n", ":3:"},
		{"version = 1\n[categories]\nnetworked = \"nope\"\n", ":3:"},
		{"version = 1\n[categories]\nunparsable = \"allow\"\n", ":3:"},
		{"version = 2\n", ":1:"},
		{"version = 1\nbogus = 3\n", ":2:"},
		{"version = 1\n[[rule]]\nprogram = \"x\"\naction = \"deny\"\n", ":3:"},
	} {
		home := t.TempDir()
		writeFile(t, filepath.Join(home, FileName), c.text)
		_, err := Load(home, "")
		if err == nil || !strings.Contains(err.Error(), FileName+c.want) {
			t.Errorf("%q: error %v, want one naming line %s", c.text, err, c.want)
		}
	}
}

// FuzzClassify checks that no input makes Classify panic, and that it
// always gives a valid action with a reason.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"ls", "a | b && c; d &", "$(curl x)", "echo 'x", "f() { g; }; f",
		"cat <<EOF\n$(x)\nEOF", "bash -c \"sh -c 'eval x'\"", "find . -exec rm {} +", "xargs", "env", "timeout",
		"sed 's/a/b/w x' f", "sed -e 1e -e y/a/", "tar -cfh:x -I", "git -c alias.a=b a", "env -S", "kill -s",
		"watch -n", "parallel ::: x", "bash -c 'x=a[1]; echo $((x))'", "cat /{a,{b,c}}/*"} {
		f.Add(s, "/")
	}
	f.Fuzz(func(t *testing.T, script, cwd string) {
		for _, req := range []Request{{Shell: script, Cwd: cwd}, {Argv: strings.Fields(script), Cwd: cwd}} {
			d := Classify(req, nil)
			if !d.Action.Valid() || d.Reason == "" && len(d.Commands) > 0 {
				t.Fatalf("%q: %+v", script, d)
			}
		}
	})
}
