package policy

import (
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// classifyShell handles sh/bash/...: the script of -c (the first plain
// word after the options, wherever -c is among them) is parsed in the
// shell's dialect; a script file cannot be seen into; a bare shell runs
// whatever arrives on its input.
func classifyShell(s *scanner, f *finding, c call) bool {
	args := c.args
	lang, ok := shellLang(f.program)
	if !ok {
		f.add(Unparsable, f.program+" scripts are not read by the policy")
		return false
	}
	cflag, i := false, 0
options:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-":
			i++
			break options
		case a == "--version" || a == "--help":
			f.add(ReadOnly, f.program+" "+a)
			return false
		case a == "--rcfile" || a == "--init-file":
			f.add(Unknown, f.program+" "+a+" sources a file the policy cannot see into")
			i++
		case strings.HasPrefix(a, "--"):
		case a == "-o" || a == "+o" || a == "-O" || a == "+O":
			i++
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			if strings.HasPrefix(a, "-") && strings.Contains(a, "c") {
				cflag = true
			}
		default:
			break options
		}
	}
	rest := args[min(i, len(args)):]
	switch {
	case cflag && len(rest) == 0:
		f.add(Unparsable, f.program+" -c without a script")
	case cflag && c.dyn[len(args)-len(rest)]:
		f.add(Unparsable, f.program+" -c runs a script computed when the outer script runs")
	case cflag:
		s.script(rest[0], lang, c.level+1)
		return true
	case len(rest) > 0:
		f.add(Unknown, f.program+" runs the script file "+printable(rest[0])+", which the policy cannot see into")
	default:
		f.add(Unparsable, f.program+" reads commands from its input, which the policy cannot see")
	}
	return false
}

// specialNumbers are variables the shell itself keeps numeric.
var specialNumbers = set("RANDOM", "SRANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "EPOCHSECONDS", "UID", "EUID",
	"#", "?", "$", "!", "OPTIND")

var number = regexp.MustCompile(`^\s*[-+]?(0[xX][0-9a-fA-F]+|[0-9]+(#[0-9a-zA-Z@_]+)?)\s*$`)

// arithmetic denies bash arithmetic that reads a variable whose value is
// not known to be a number: bash evaluates such a value as an expression,
// and a subscript in it (a[$(cmd)]) runs cmd. POSIX sh has no arrays.
func (s *scanner) arithmetic(f *syntax.File) {
	arith := map[string]bool{} // variables assigned by arithmetic
	var roots []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.ArithmExp:
			roots = append(roots, x.X)
		case *syntax.ArithmCmd:
			roots = append(roots, x.X)
		case *syntax.LetClause:
			for _, e := range x.Exprs {
				roots = append(roots, e)
			}
		case *syntax.CStyleLoop:
			for _, e := range []syntax.ArithmExpr{x.Init, x.Cond, x.Post} {
				if e != nil {
					roots = append(roots, e)
				}
			}
		case *syntax.ParamExp:
			if x.Index != nil {
				roots = append(roots, x.Index)
			}
			if x.Slice != nil {
				for _, e := range []syntax.ArithmExpr{x.Slice.Offset, x.Slice.Length} {
					if e != nil {
						roots = append(roots, e)
					}
				}
			}
		case *syntax.BinaryTest:
			switch x.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				roots = append(roots, x.X, x.Y)
			}
		case *syntax.BinaryArithm:
			if isArithAssign(x.Op) {
				if name := arithName(x.X); name != "" {
					arith[name] = true
				}
			}
		case *syntax.UnaryArithm:
			if x.Op == syntax.Inc || x.Op == syntax.Dec {
				if name := arithName(x.X); name != "" {
					arith[name] = true
				}
			}
		}
		return true
	})
	seen := map[string]bool{}
	for _, r := range roots {
		syntax.Walk(r, func(n syntax.Node) bool {
			w, ok := n.(*syntax.Word)
			if !ok {
				return true
			}
			name := arithName(w)
			if name == "" || seen[name] || s.numeric(name, arith) {
				return true
			}
			seen[name] = true
			s.deny("(("+name+"))", "arithmetic reads $%s, whose value could hold an array subscript that runs a command", name)
			return true
		})
	}
}

func isArithAssign(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
		syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
		return true
	}
	return false
}

// arithName is the variable an arithmetic word names ("" for a number or
// anything else).
func arithName(e syntax.Node) string {
	w, ok := e.(*syntax.Word)
	if !ok || len(w.Parts) != 1 {
		return ""
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		name, _, _ := strings.Cut(p.Value, "[")
		if name == "" || number.MatchString(name) || !isAssignment(name+"=") {
			return ""
		}
		return name
	case *syntax.ParamExp:
		if p.Param != nil {
			return p.Param.Value
		}
	case *syntax.DblQuoted:
		if len(p.Parts) == 1 {
			return arithName(&syntax.Word{Parts: p.Parts})
		}
	}
	return ""
}

// numeric reports a variable known to hold a number.
func (s *scanner) numeric(name string, arith map[string]bool) bool {
	if specialNumbers[name] {
		return true
	}
	v := s.vars[name]
	if v == nil {
		return arith[name]
	}
	if v.unknown {
		return false
	}
	for _, val := range v.values {
		if !number.MatchString(val) {
			return false
		}
	}
	return true
}
