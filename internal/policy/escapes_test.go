package policy

import (
	"bufio"
	"os"
	"path"
	"strings"
	"testing"
)

// Escape is one line of testdata/escapes.txt.
type escape struct {
	line     int
	text     string // the command line, after its prefixes
	req      Request
	inherent bool
}

// mapLinks are the symlinks of a test vault, by clean absolute path.
type mapLinks map[string]string

func (m mapLinks) Readlink(p string) (string, bool) {
	t, ok := m[p]
	return t, ok
}

// escapePlaceholders are the values the classifier's table gives the
// placeholders of escapes.txt.
var escapePlaceholders = strings.NewReplacer("{PORT}", "8080", "{CANARY}", "/tmp/avfs-canary/secret",
	"{AVFS_HOME}", "/root/.avfs", "{HOME_CANARY}", "/root/.avfs/canary")

// readEscapes reads testdata/escapes.txt (its format is at its top).
func readEscapes(t *testing.T) []escape {
	t.Helper()
	f, err := os.Open("testdata/escapes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []escape
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e := escape{line: n}
		if s, ok := strings.CutSuffix(text, "# inherent"); ok {
			text, e.inherent = strings.TrimSpace(s), true
		}
		links := mapLinks{}
		for strings.HasPrefix(text, "@") {
			pre, rest, _ := strings.Cut(text, " ")
			text = rest
			switch k, v, _ := strings.Cut(pre[1:], "="); k {
			case "cwd":
				e.req.Cwd = v
			case "ln":
				target, p, ok := strings.Cut(v, ":")
				if !ok {
					t.Fatalf("escapes.txt:%d: @ln=TARGET:PATH, not %q", n, pre)
				}
				links[path.Clean("/"+p)] = target
			case "env":
				e.req.Env = append(e.req.Env, v)
			default:
				t.Fatalf("escapes.txt:%d: unknown prefix %q", n, pre)
			}
		}
		if len(links) > 0 {
			e.req.Links = links
		}
		e.text = text
		text = escapePlaceholders.Replace(text)
		if s, ok := strings.CutPrefix(text, "$ "); ok {
			e.req.Shell = s
		} else {
			words, _, ok := splitWords(text)
			if !ok || len(words) == 0 {
				t.Fatalf("escapes.txt:%d: not a plain argv: %q", n, text)
			}
			e.req.Argv = words
		}
		out = append(out, e)
	}
	return out
}

// TestEscapes: every escape line is denied or waits for a person, except
// the ones marked inherent, which still never run without a checkpoint.
func TestEscapes(t *testing.T) {
	t.Parallel()
	lines := readEscapes(t)
	inherent := 0
	for _, e := range lines {
		d := Classify(e.req, nil)
		if e.inherent {
			inherent++
			if d.Action == Allow {
				t.Errorf("escapes.txt:%d: %q (inherent) is allowed without a checkpoint: %s", e.line, e.text, d.Reason)
			}
			continue
		}
		if d.Action != Deny && d.Action != RequireApproval {
			t.Errorf("escapes.txt:%d: %q: %s (%s, %s)", e.line, e.text, d.Action, d.Reason, d.Rule)
		}
	}
	if len(lines)-inherent < 150 {
		t.Errorf("only %d escape lines besides the %d inherent ones", len(lines)-inherent, inherent)
	}
	t.Logf("%d escape lines, %d of them inherent", len(lines), inherent)
}

// TestProgramTable: every program of the classifier's table and every
// wrapper has a row in testdata/programs.txt, and every row's decision
// holds.
func TestProgramTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/programs.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		action, argv, _ := strings.Cut(line, " ")
		words, _, ok := splitWords(strings.TrimSpace(argv))
		if !ok || len(words) == 0 || !Action(action).Valid() {
			t.Fatalf("programs.txt:%d: %q is not ACTION ARGV", n+1, line)
		}
		rows[words[0]]++
		if d := Classify(Request{Argv: words}, nil); d.Action != Action(action) {
			t.Errorf("programs.txt:%d: %v: %s (%s), want %s", n+1, words, d.Action, d.Reason, action)
		}
	}
	for name := range programs {
		if rows[name] == 0 {
			t.Errorf("program %s has no row in testdata/programs.txt", name)
		}
	}
	for name := range wrappers {
		if rows[name] == 0 {
			t.Errorf("wrapper %s has no row in testdata/programs.txt", name)
		}
	}
}
