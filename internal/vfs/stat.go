package vfs

import (
	"fmt"
	"io"
	"strings"
)

// WriteStat writes git's --stat of patches: a line per path git keeps,
// with a bar of + and - scaled to 50 columns, and the totals. A rename
// is named as git names it ("dir/{old => new}.go").
func WriteStat(w io.Writer, ps []FilePatch) {
	width, most := 0, 0
	var shown []FilePatch
	var names []string
	for _, p := range ps {
		if p.Text == "" {
			continue
		}
		name := strings.TrimPrefix(p.Path, "/")
		if p.From != "" {
			name = renameName(strings.TrimPrefix(p.From, "/"), name)
		}
		shown = append(shown, p)
		names = append(names, name)
		width = max(width, len(name))
		most = max(most, p.Insertions+p.Deletions)
	}
	digits := len(fmt.Sprint(most))
	ins, del := 0, 0
	for i, p := range shown {
		name := names[i]
		if p.Binary {
			fmt.Fprintf(w, " %-*s | %*s %d -> %d bytes\n", width, name, digits, "Bin", p.SizeBefore, p.SizeAfter)
			continue
		}
		n := p.Insertions + p.Deletions
		plus, minus := p.Insertions, p.Deletions
		if most > 50 {
			plus, minus = scaled(p.Insertions, most), scaled(p.Deletions, most)
		}
		bar := ""
		if n > 0 {
			bar = " " + strings.Repeat("+", plus) + strings.Repeat("-", minus)
		}
		fmt.Fprintf(w, " %-*s | %*d%s\n", width, name, digits, n, bar)
		ins += p.Insertions
		del += p.Deletions
	}
	files := "files"
	if len(shown) == 1 {
		files = "file"
	}
	fmt.Fprintf(w, " %d %s changed", len(shown), files)
	if ins > 0 || del == 0 {
		fmt.Fprintf(w, ", %d insertion%s(+)", ins, plural(ins))
	}
	if del > 0 || ins == 0 {
		fmt.Fprintf(w, ", %d deletion%s(-)", del, plural(del))
	}
	fmt.Fprintln(w)
}

// renameName is git's name of a rename in --stat (diff.c pprint_rename):
// the common leading directories and trailing path outside braces.
func renameName(a, b string) string {
	if quoteGit(a) != a || quoteGit(b) != b {
		return quoteGit(a) + " => " + quoteGit(b)
	}
	pfx := 0
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '/' {
			pfx = i + 1
		}
	}
	// The common suffix starts at a slash; with a common prefix it may
	// reach back to the prefix's own slash.
	sfx := 0
	adj := 0
	if pfx > 0 {
		adj = 1
	}
	for i, j := len(a)-1, len(b)-1; i >= pfx-adj && j >= pfx-adj && a[i] == b[j]; i, j = i-1, j-1 {
		if a[i] == '/' {
			sfx = len(a) - i
		}
	}
	midA, midB := max(0, len(a)-pfx-sfx), max(0, len(b)-pfx-sfx)
	if pfx+sfx == 0 {
		return a + " => " + b
	}
	return a[:pfx] + "{" + a[pfx:pfx+midA] + " => " + b[pfx:pfx+midB] + "}" + a[len(a)-sfx:]
}

// scaled is n of most as a bar of 50 columns, at least one for n > 0.
func scaled(n, most int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*50/most)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
