package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// The policy files, relative to $AVFS_HOME:
//
//	policy.toml              the home's policy, for every vault
//	policies/<vault>.toml    one vault's policy; it can only tighten
//
// Both have the same shape:
//
//	version = 1
//	[categories]              # optional: the action of a default category
//	networked = "deny"
//	[[rule]]                  # ordered; the first rule that matches a command decides
//	name = "no-docker"        # optional; names the rule in decisions
//	program = ["docker", "podman"]   # globs on the program's name
//	args = ["run*"]           # globs; each must match some argument
//	categories = ["networked"]       # any of these categories
//	action = "deny"
//	reason = "containers reach the host"
//	network = "host"          # optional: a run this rule decides gets the host's network
//	[sandbox]                 # optional: what an isolated run sees (docs/proxy.md)
//	hide = ["~/work/secrets"]         # hidden besides the defaults
//	read_only = [".git/hooks"]        # read-only inside writable trees
//	writable = ["$GOCACHE", "~/.m2"]  # host dirs a run may write; replaces the default list
//
// A rule matches when all the conditions it states hold. A vault file's
// categories and rules apply only where they are stricter than the home's;
// its rules cannot grant the network, and its [sandbox] can only hide
// more, make more read-only, and keep fewer writable dirs (those of its
// writable list that lie in the home's).
const (
	FileName   = "policy.toml"
	VaultDir   = "policies"
	FileFormat = 1
)

// Policy is the effective rule set: the defaults, the home's file and a
// vault's file.
type Policy struct {
	Version    int                 `json:"version"`
	Sources    []string            `json:"sources"`
	Actions    map[Category]Action `json:"categories"`
	Rules      []Rule              `json:"rules"`
	VaultRules []Rule              `json:"vault_rules"`
	Sandbox    Sandbox             `json:"sandbox"`

	home, vault map[Category]Action
}

// Rule is one rule of a policy file.
type Rule struct {
	ID         string   `json:"id"`
	Name       string   `json:"name,omitempty" toml:"name"`
	Program    []string `json:"program,omitempty" toml:"program"`
	Args       []string `json:"args,omitempty" toml:"args"`
	Categories []string `json:"categories,omitempty" toml:"categories"`
	Action     Action   `json:"action" toml:"action"`
	Reason     string   `json:"reason,omitempty" toml:"reason"`
	// Network "host" gives a run this rule decides the host's network
	// when it is isolated (home policy only).
	Network string `json:"network,omitempty" toml:"network"`

	prog, args []*regexp.Regexp
}

// Sandbox is the [sandbox] table: paths as written (~/, $GOCACHE,
// $GOMODCACHE, $NPM_CACHE, absolute, or relative to the workspace),
// resolved by package sandbox when a run starts.
type Sandbox struct {
	Hide     []string `json:"hide" toml:"hide"`
	ReadOnly []string `json:"read_only" toml:"read_only"`
	Writable []string `json:"writable" toml:"writable"`
}

// DefaultWritable are the host dirs an isolated run may write when no
// policy file lists its own: Go's build and module caches, npm's and
// pip's caches, so that builds inside the boundary stay warm.
var DefaultWritable = []string{"$GOCACHE", "$GOMODCACHE", "$NPM_CACHE", "~/.cache/pip"}

// GrantsNetwork reports whether d gives an isolated run the host's
// network: every command of it was decided by a home rule that says
// network = "host". A command decided by a default category or a vault
// rule keeps the run off the network.
func (p *Policy) GrantsNetwork(d Decision) bool {
	if p == nil || len(d.Commands) == 0 {
		return false
	}
	for _, c := range d.Commands {
		granted := false
		for _, r := range p.Rules {
			if r.ID == c.Rule && r.Network == "host" {
				granted = true
			}
		}
		if !granted {
			return false
		}
	}
	return true
}

// Default is the policy of the default rules alone.
func Default() *Policy {
	p := &Policy{Version: FileFormat, Sources: []string{}, Rules: []Rule{}, VaultRules: []Rule{},
		Sandbox: Sandbox{Hide: []string{}, ReadOnly: []string{}, Writable: slices.Clone(DefaultWritable)}}
	p.effective()
	return p
}

// effective fills Actions from the defaults and the two files.
func (p *Policy) effective() {
	p.Actions = map[Category]Action{}
	for _, c := range Categories {
		p.Actions[c] = p.categoryAction(c)
	}
}

func (p *Policy) categoryAction(c Category) Action {
	a := DefaultActions[c]
	if h, ok := p.home[c]; ok {
		a = h
	}
	if v, ok := p.vault[c]; ok && v.Stricter(a) {
		a = v
	}
	return a
}

// match returns the first rule of rules that matches f.
func (p *Policy) match(rules []Rule, f *finding) (Rule, bool) {
	for _, r := range rules {
		if r.matches(f) {
			return r, true
		}
	}
	return Rule{}, false
}

func (r Rule) matches(f *finding) bool {
	if len(r.prog) > 0 && !anyMatch(r.prog, f.program) {
		return false
	}
	for _, re := range r.args {
		if !anyArg(re, f.args) {
			return false
		}
	}
	return len(r.Categories) == 0 || f.hasCat(r.Categories)
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func anyArg(re *regexp.Regexp, args []string) bool {
	for _, a := range args {
		if re.MatchString(a) {
			return true
		}
	}
	return false
}

func (r Rule) reasonFor(f *finding) string {
	if r.Reason != "" {
		return r.Reason
	}
	return fmt.Sprintf("%s matches rule %s", f.program, r.ID)
}

// glob compiles a shell-style pattern: * and ? match any characters,
// slashes included (arguments are URLs and paths, not file names), and
// [...] a class.
func glob(pat string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(pat[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ in pattern %q", pat)
			}
			class := pat[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// file is the TOML shape of a policy file.
type file struct {
	Version    int               `toml:"version"`
	Categories map[string]string `toml:"categories"`
	Rule       []Rule            `toml:"rule"`
	Sandbox    *fileSandbox      `toml:"sandbox"`
}

// fileSandbox is [sandbox] as written: a nil list was not given.
type fileSandbox struct {
	Hide     []string  `toml:"hide"`
	ReadOnly []string  `toml:"read_only"`
	Writable *[]string `toml:"writable"`
}

// Load reads the home's policy file and, when vault is not empty, that
// vault's. Missing files are fine; an invalid one is an InvalidInput error
// whose message names the file and line.
func Load(homeDir, vault string) (*Policy, error) {
	p := Default()
	home, rules, sb, ok, err := readFile(filepath.Join(homeDir, FileName), false)
	if err != nil {
		return nil, err
	}
	if ok {
		p.home, p.Rules = home, rules
		p.Sources = append(p.Sources, filepath.Join(homeDir, FileName))
		p.Sandbox.add(sb, false)
	}
	if vault != "" {
		path := filepath.Join(homeDir, VaultDir, vault+".toml")
		va, vrules, sb, ok, err := readFile(path, true)
		if err != nil {
			return nil, err
		}
		if ok {
			p.vault, p.VaultRules = va, vrules
			p.Sources = append(p.Sources, path)
			p.Sandbox.add(sb, true)
		}
	}
	p.effective()
	return p, nil
}

var ruleHeader = regexp.MustCompile(`^\s*\[\[\s*rule\s*\]\]`)

// add merges a file's [sandbox] into the effective one. The home's
// writable list replaces the default; a vault's keeps only what the
// effective list already holds, or lies under it, so it only narrows.
func (s *Sandbox) add(f *fileSandbox, vault bool) {
	if f == nil {
		return
	}
	s.Hide = append(s.Hide, f.Hide...)
	s.ReadOnly = append(s.ReadOnly, f.ReadOnly...)
	if f.Writable == nil {
		return
	}
	if !vault {
		s.Writable = slices.Clone(*f.Writable)
		return
	}
	kept := []string{}
	for _, w := range *f.Writable {
		for _, h := range s.Writable {
			if w == h || strings.HasPrefix(w, strings.TrimSuffix(h, "/")+"/") {
				kept = append(kept, w)
				break
			}
		}
	}
	s.Writable = kept
}

// readFile parses one policy file; ok is false when it does not exist.
func readFile(path string, isVault bool) (map[Category]Action, []Rule, *fileSandbox, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, nil, false, &errs.Error{Kind: errs.IoError, Op: "policy", Path: path, Err: err}
	}
	text := string(b)
	bad := func(line int, format string, args ...any) error {
		loc := path
		if line > 0 {
			loc = fmt.Sprintf("%s:%d", path, line)
		}
		return &errs.Error{Kind: errs.InvalidInput, Op: "policy",
			Err:  fmt.Errorf("%s: %s", loc, fmt.Sprintf(format, args...)),
			Hint: "fix the policy file (see docs/proxy.md); nothing runs until it is valid"}
	}
	var f file
	md, err := toml.Decode(text, &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, nil, nil, false, bad(pe.Position.Line, "%s", pe.Message)
		}
		line := 0
		if m := regexp.MustCompile(`line (\d+)`).FindStringSubmatch(err.Error()); m != nil {
			_, _ = fmt.Sscan(m[1], &line)
		}
		return nil, nil, nil, false, bad(line, "%s", strings.TrimPrefix(err.Error(), "toml: "))
	}
	lines := strings.Split(text, "\n")
	if und := md.Undecoded(); len(und) > 0 {
		key := und[0].String()
		last := key[strings.LastIndexByte(key, '.')+1:]
		return nil, nil, nil, false, bad(lineOf(lines, last), "unknown key %q", key)
	}
	if f.Version != FileFormat {
		return nil, nil, nil, false, bad(lineOf(lines, "version"), "version is %d; this avfs reads policy files of version %d", f.Version, FileFormat)
	}
	actions := map[Category]Action{}
	for name, a := range f.Categories {
		c := Category(name)
		if _, ok := DefaultActions[c]; !ok {
			return nil, nil, nil, false, bad(lineOf(lines, name), "unknown category %q", name)
		}
		if !Action(a).Valid() {
			return nil, nil, nil, false, bad(lineOf(lines, name), "unknown action %q", a)
		}
		if c == Unparsable && Action(a) != Deny {
			return nil, nil, nil, false, bad(lineOf(lines, name), "unparsable commands are always denied")
		}
		actions[c] = Action(a)
	}
	var headers []int
	for i, l := range lines {
		if ruleHeader.MatchString(l) {
			headers = append(headers, i+1)
		}
	}
	base := filepath.Base(path)
	if isVault {
		base = VaultDir + "/" + base
	}
	for i := range f.Rule {
		r := &f.Rule[i]
		line := 0
		if i < len(headers) {
			line = headers[i]
		}
		if !r.Action.Valid() {
			return nil, nil, nil, false, bad(line, "rule %d: action %q is not one of allow, allow_with_checkpoint, require_approval, deny", i+1, r.Action)
		}
		for _, c := range r.Categories {
			if _, ok := DefaultActions[Category(c)]; !ok {
				return nil, nil, nil, false, bad(line, "rule %d: unknown category %q", i+1, c)
			}
		}
		for _, g := range r.Program {
			re, err := glob(g)
			if err != nil {
				return nil, nil, nil, false, bad(line, "rule %d: %v", i+1, err)
			}
			r.prog = append(r.prog, re)
		}
		for _, g := range r.Args {
			re, err := glob(g)
			if err != nil {
				return nil, nil, nil, false, bad(line, "rule %d: %v", i+1, err)
			}
			r.args = append(r.args, re)
		}
		switch {
		case r.Network != "" && r.Network != "host" && r.Network != "none":
			return nil, nil, nil, false, bad(line, "rule %d: network %q is not host or none", i+1, r.Network)
		case r.Network == "host" && isVault:
			return nil, nil, nil, false, bad(line, "rule %d: a vault's policy can only narrow; network = \"host\" belongs in the home's policy.toml", i+1)
		}
		r.ID = fmt.Sprintf("%s#%d", base, i+1)
		if r.Name != "" {
			r.ID = base + "#" + r.Name
		}
	}
	if f.Rule == nil {
		f.Rule = []Rule{}
	}
	if sb := f.Sandbox; sb != nil {
		lists := [][]string{sb.Hide, sb.ReadOnly}
		if sb.Writable != nil {
			lists = append(lists, *sb.Writable)
		}
		for _, l := range lists {
			for _, p := range l {
				if p == "" || strings.ContainsRune(p, 0) || (strings.HasPrefix(p, "$") && !slices.Contains(DefaultWritable, p)) {
					return nil, nil, nil, false, bad(lineOf(lines, "hide"), "[sandbox]: path %q is not ~/..., an absolute path, a path in the workspace, or $GOCACHE, $GOMODCACHE, $NPM_CACHE", p)
				}
			}
		}
	}
	return actions, f.Rule, f.Sandbox, true, nil
}

// lineOf is the first line that sets key, for error messages.
func lineOf(lines []string, key string) int {
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, key) && strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(l, key)), "=") {
			return i + 1
		}
	}
	return 0
}
