// Package policy decides, before any work is done, what avfs proxy exec may
// do with a command: allow it, allow it behind a checkpoint, ask a person,
// or refuse it. Classify is a function of the request and the rules: it
// starts nothing and writes nothing, so a denied command costs nothing and
// `avfs policy check` can show the decision without running anything. The
// only thing it may read is the workspace's symlinks, through the Links
// the caller gives it.
//
// The command line is never trusted by its shape. Shell text (--shell, and
// the script argument of sh -c / bash -c, trap, su -c ...) is parsed with a
// real shell parser, every simple command in it is classified (pipelines,
// lists, subshells, command and process substitutions, function bodies,
// here-documents fed to a shell), wrappers such as env, sudo, timeout or
// xargs are looked through, and the strictest decision wins. What the
// parser cannot see — a syntax error, eval, a command name built at run
// time — is denied with a reason.
//
// Programs are classified by one table (programs.go), wrappers looked
// through by another (wrappers.go). Scripts are parsed in the dialect of
// the shell that runs them. A word known only at run time is never
// allowed without a checkpoint, and the decision says so (Dynamic).
//
// This reads the command line only: a program that is allowed may itself do
// anything its code does (a Python script that opens a socket is not
// seen). The proxy runs what is allowed in namespaces that hold the
// decision (package sandbox); without them this is the only wall.
package policy

import (
	"slices"
	"strings"
)

// Action is what the proxy does with a command. The strings are part of
// the JSON contract.
type Action string

// The actions, from the most to the least permissive.
const (
	Allow               Action = "allow"
	AllowWithCheckpoint Action = "allow_with_checkpoint"
	RequireApproval     Action = "require_approval"
	Deny                Action = "deny"
)

// rank orders actions by strictness; an unknown action ranks as deny, so a
// damaged decision never loosens anything.
func (a Action) rank() int {
	switch a {
	case Allow:
		return 0
	case AllowWithCheckpoint:
		return 1
	case RequireApproval:
		return 2
	}
	return 3
}

// Stricter reports whether a is stricter than b.
func (a Action) Stricter(b Action) bool { return a.rank() > b.rank() }

// Valid reports whether a is one of the four actions.
func (a Action) Valid() bool {
	return a == Allow || a == AllowWithCheckpoint || a == RequireApproval || a == Deny
}

// Category is a class of behaviour a command shows.
type Category string

// The categories of the default rules, with the action each one implies.
const (
	HostEscape  Category = "host_escape_risk" // names paths outside the workspace
	Networked   Category = "networked"        // talks to the network
	Destructive Category = "destructive"      // deletes or overwrites in bulk
	Mutating    Category = "mutating"         // writes files
	Interactive Category = "interactive"      // wants a terminal
	ReadOnly    Category = "read_only"        // only reads
	Unknown     Category = "unknown"          // a program the rules do not know
	Unparsable  Category = "unparsable"       // cannot be seen through: syntax error, eval, $CMD
)

// Categories lists every category, in the order `policy show` prints them.
var Categories = []Category{HostEscape, Unparsable, Networked, Destructive, Mutating, Interactive, Unknown, ReadOnly}

// DefaultActions maps each category to its action when no rule file says
// otherwise.
var DefaultActions = map[Category]Action{
	HostEscape:  Deny,
	Unparsable:  Deny,
	Networked:   RequireApproval,
	Destructive: AllowWithCheckpoint,
	Mutating:    AllowWithCheckpoint,
	Interactive: AllowWithCheckpoint,
	Unknown:     AllowWithCheckpoint,
	ReadOnly:    Allow,
}

// Request is what is classified: an argv, or a shell script, run with
// working directory Cwd (a path inside the workspace; "" is its root).
type Request struct {
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
	Cwd   string   `json:"cwd,omitempty"`
	// Env is what the command's environment gets besides the runtime's
	// (--env): assignments that change what runs are judged.
	Env []string `json:"env,omitempty"`
	// Links resolves the workspace's symlinks, so that --cwd and ".." are
	// judged where they really lead; nil judges paths by their text.
	Links Links `json:"-"`
}

// Decision is the policy's answer for a whole request. Commands holds the
// answer for each simple command found in it; the request's action is the
// strictest of them.
type Decision struct {
	Action     Action    `json:"action"`
	Categories []string  `json:"categories"`
	Reason     string    `json:"reason"`
	Rule       string    `json:"rule"`
	Commands   []Command `json:"commands"`
	// Dynamic is true when some word of the request is known only at run
	// time ($x, $(...), $'...'): such a request is never allowed without
	// a checkpoint, since what it names is not known.
	Dynamic bool `json:"dynamic"`
}

// Command is the decision for one simple command of a request.
type Command struct {
	Program    string   `json:"program"`
	Args       []string `json:"args"`
	Action     Action   `json:"action"`
	Categories []string `json:"categories"`
	Reason     string   `json:"reason"`
	Rule       string   `json:"rule"`
	Dynamic    bool     `json:"dynamic"` // an argument is known only at run time
}

// finding is what the default rules see in one simple command.
type finding struct {
	program string
	args    []string
	cats    map[Category]string // category → why
	dynamic bool                // some word is known only at run time
}

func newFinding(program string, args []string) *finding {
	return &finding{program: program, args: args, cats: map[Category]string{}}
}

func (f *finding) add(c Category, why string) {
	if _, ok := f.cats[c]; !ok {
		f.cats[c] = why
	}
}

func (f *finding) categories() []string {
	out := make([]string, 0, len(f.cats))
	for _, c := range Categories {
		if _, ok := f.cats[c]; ok {
			out = append(out, string(c))
		}
	}
	return out
}

// Classify decides what to do with req under p (nil: the default rules).
// It never panics on any input.
func Classify(req Request, p *Policy) Decision {
	if p == nil {
		p = Default()
	}
	found := scan(req)
	d := Decision{Action: Allow, Categories: []string{}, Commands: []Command{}}
	cats := map[string]bool{}
	for _, f := range found {
		c := p.decide(f)
		d.Commands = append(d.Commands, c)
		d.Dynamic = d.Dynamic || c.Dynamic
		for _, k := range c.Categories {
			cats[k] = true
		}
		if c.Action.Stricter(d.Action) || d.Rule == "" {
			d.Action, d.Reason, d.Rule = c.Action, c.Reason, c.Rule
		}
	}
	if len(found) == 0 {
		d.Reason, d.Rule = "no command to run", "default"
	}
	for _, c := range Categories {
		if cats[string(c)] {
			d.Categories = append(d.Categories, string(c))
		}
	}
	return d
}

// decide applies the rule files and the default categories to a finding.
func (p *Policy) decide(f *finding) Command {
	c := Command{Program: f.program, Args: f.args, Categories: f.categories(), Action: Allow, Dynamic: f.dynamic}
	if c.Args == nil {
		c.Args = []string{}
	}
	for _, cat := range Categories {
		why, ok := f.cats[cat]
		if !ok {
			continue
		}
		a := p.categoryAction(cat)
		if a.Stricter(c.Action) || c.Rule == "" {
			c.Action, c.Reason, c.Rule = a, why, "default:"+string(cat)
		}
	}
	// Unparsable input is never loosened by a rule: a rule cannot match
	// what could not be read.
	if _, ok := f.cats[Unparsable]; ok {
		return c
	}
	if r, ok := p.match(p.Rules, f); ok {
		c.Action, c.Reason, c.Rule = r.Action, r.reasonFor(f), r.ID
	}
	if r, ok := p.match(p.VaultRules, f); ok && r.Action.Stricter(c.Action) {
		c.Action, c.Reason, c.Rule = r.Action, r.reasonFor(f), r.ID
	}
	return c
}

// hasCat reports whether a finding shows any of cats (names).
func (f *finding) hasCat(cats []string) bool {
	return slices.ContainsFunc(cats, func(c string) bool {
		_, ok := f.cats[Category(strings.TrimSpace(c))]
		return ok
	})
}
