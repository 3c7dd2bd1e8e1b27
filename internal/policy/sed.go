package policy

import "strings"

// classifySed reads sed's script: without -i it only prints, unless a
// command writes a file (w, W, s///w), reads one (r, R), or runs one (e,
// s///e). A script in a file (-f) is not seen.
func classifySed(s *scanner, f *finding, c call) bool {
	args := c.args
	var scripts []string
	explicit := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-e" || a == "--expression":
			if i+1 < len(args) {
				i++
				scripts, explicit = append(scripts, args[i]), true
			}
		case strings.HasPrefix(a, "--expression="):
			scripts, explicit = append(scripts, a[len("--expression="):]), true
		case a == "-f" || a == "--file" || strings.HasPrefix(a, "--file=") || strings.HasPrefix(a, "-f") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			f.add(Unknown, "sed -f runs a script file the policy cannot see into")
			if a == "-f" || a == "--file" {
				i++
			}
			explicit = true
		case strings.HasPrefix(a, "-e") && len(a) > 2:
			scripts, explicit = append(scripts, a[2:]), true
		case a == "-l" || a == "--line-length":
			i++
		case strings.HasPrefix(a, "-") && a != "-":
		default:
			if !explicit {
				scripts, explicit = append(scripts, a), true
			}
		}
	}
	if hasFlag(args, "i", "--in-place") || hasPrefixArg(args, "--in-place") {
		f.add(Mutating, "sed -i edits files in place")
	}
	for _, sc := range scripts {
		sedScript(s, f, sc, c.level)
	}
	if len(f.cats) == 0 {
		f.add(ReadOnly, "sed without -i only prints")
	}
	return false
}

// sedScript judges the commands of one sed script.
func sedScript(s *scanner, f *finding, src string, level int) {
	i := 0
	n := len(src)
	file := func() string { // the rest of the line: a file name or a command
		j := i
		for j < n && src[j] != '\n' {
			j++
		}
		v := strings.TrimSpace(src[i:j])
		i = j
		return v
	}
	delimited := func() bool { // skips /x/ (or another delimiter); false at the end
		if i >= n {
			return false
		}
		d := src[i]
		i++
		for i < n && src[i] != d {
			if src[i] == '\\' {
				i++
			}
			i++
		}
		i++
		return i <= n
	}
	for i < n {
		ch := src[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '!' || ch == '{' || ch == '}' || ch == ',' || ch == '~' || ch == '$' || ch == '+':
			i++
		case ch >= '0' && ch <= '9':
			i++
		case ch == '/':
			delimited()
		case ch == '\\':
			i++
			delimited()
		case ch == '#' || ch == ':' || ch == 'b' || ch == 't' || ch == 'T' || ch == 'a' || ch == 'i' || ch == 'c':
			i++
			file() // a comment, label, or text
		case ch == 'r' || ch == 'R' || ch == 'w' || ch == 'W':
			i++
			target := file()
			if why := s.hostPath(target); why != "" && !quietTargets[target] {
				f.add(HostEscape, "sed "+string(ch)+" "+why+": "+printable(target))
			}
			if ch == 'w' || ch == 'W' {
				f.add(Mutating, "sed "+string(ch)+" writes "+target)
			}
		case ch == 'e':
			i++
			cmd := file()
			if cmd == "" {
				f.add(Unparsable, "sed e runs the text it edits as a command")
			} else {
				f.add(Unknown, "sed e runs a command")
				s.script(cmd, syntaxSh, level+1)
			}
		case ch == 's' || ch == 'y':
			i++
			if i >= n {
				return
			}
			d := src[i]
			for k := 0; k < 2; k++ {
				i++
				for i < n && src[i] != d {
					if src[i] == '\\' {
						i++
					}
					i++
				}
			}
			i++
			if ch == 'y' {
				continue
			}
			for i < n && strings.IndexByte("gpiImMe0123456789w", src[i]) >= 0 {
				switch src[i] {
				case 'e':
					f.add(Unparsable, "sed s///e runs the text it edits as a command")
				case 'w':
					i++
					target := file()
					if why := s.hostPath(target); why != "" && !quietTargets[target] {
						f.add(HostEscape, "sed s///w "+why+": "+printable(target))
					}
					f.add(Mutating, "sed s///w writes "+target)
					continue
				}
				i++
			}
		case strings.IndexByte("=dDgGhHlnNpPqQxzF", ch) >= 0:
			i++
		default:
			f.add(Unknown, "sed script not understood: "+src)
			return
		}
	}
}
