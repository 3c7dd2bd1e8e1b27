package vfs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// FilePatch is one change of a diff in git's patch format.
type FilePatch struct {
	Path string
	// From is the path before a rename, "" otherwise.
	From string
	// Text is the change as `git apply` takes it, "" when the path has no
	// form in git (a directory, a device) or only a mode git does not keep.
	Text string
	// Binary: the content is not text (a NUL byte in its first 8000 bytes,
	// as git decides, or too large to compare by lines). Text then holds
	// a git binary patch, or for content over MaxTextDiff only says
	// "Binary files … differ".
	Binary bool
	// Insertions and Deletions count changed lines, for --stat.
	Insertions, Deletions int
	// SizeBefore and SizeAfter are the content sizes (binary --stat).
	SizeBefore, SizeAfter int64
}

// MaxTextDiff is the largest file diffed by lines; a larger one is shown
// as binary, so a patch never holds more than twice this per file.
const MaxTextDiff = 16 << 20

// patchContext is git's default number of context lines.
const patchContext = 3

// Patches returns the git patch of each change of Diff(from, to), in the
// same order. Only the changed paths are read; a path's content is read
// whole, up to MaxTextDiff, a chunk both sides hold fetched once, and
// compared line by line (Myers' algorithm, from github.com/sergi/go-diff).
// A rename with the same content (same chunk hashes) is not read at all.
// Git needs every byte of a binary file for its blob names, so a binary
// patch reads both sides whole too.
func Patches(from, to StateRef, changes []Change) ([]FilePatch, error) {
	var out []FilePatch
	err := from.view(func(a *Tx) error {
		return to.view(func(b *Tx) (err error) {
			out, err = patchesIn(a, b, changes)
			return err
		})
	})
	return out, err
}

func patchesIn(a, b *Tx, changes []Change) ([]FilePatch, error) {
	out := make([]FilePatch, 0, len(changes))
	for _, c := range changes {
		p, err := patchOf(a, b, c)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// side is what one state holds at a path, as git sees it.
type side struct {
	mode    string // "100644", "100755", "120000"; "" when git keeps nothing there
	content []byte
	big     bool // over MaxTextDiff: not read
	size    int64
}

// gitSide reads what t holds at p; a file's content only when read.
func gitSide(t *Tx, p string, read bool, memo chunkMemo) (side, error) {
	n, err := lookupNoFollow(t, p)
	if err != nil || n == nil {
		return side{}, err
	}
	switch n.Type {
	case TypeSymlink:
		return side{mode: "120000", content: []byte(n.target), size: int64(len(n.target))}, nil
	case TypeFile:
		s := side{mode: "100644", size: int64(n.Size)}
		if n.Mode&0o100 != 0 {
			s.mode = "100755"
		}
		if n.Size > MaxTextDiff {
			s.big = true
			return s, nil
		}
		if !read {
			return s, nil
		}
		s.content, err = readChunks(t, n, memo)
		return s, err
	}
	return side{}, nil
}

// chunkMemo holds the chunks read for one change, by hash, so that a
// chunk both sides hold is fetched once.
type chunkMemo map[string][]byte

// readChunks reads file n whole, chunk by chunk, taking from memo (when
// not nil) the chunks already read and adding those it reads.
func readChunks(t *Tx, n *inode, memo chunkMemo) ([]byte, error) {
	content := make([]byte, n.Size)
	for i := uint64(0); i*ChunkSize < n.Size; i++ {
		dst := content[i*ChunkSize : min(n.Size, (i+1)*ChunkSize)]
		sum, _, ok, err := t.chunkRef(n, i)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // a hole reads as zeros
		}
		data, seen := memo[string(sum)]
		if !seen {
			if data, err = t.chunkData(n, i); err != nil {
				return nil, err
			}
		}
		copy(dst, data)
		if memo != nil && !seen {
			memo[string(sum)] = dst[:min(len(dst), len(data))]
		}
	}
	return content, nil
}

// blobID is the side's git object name; all zeros when absent, as git writes.
func (s side) blobID() string {
	if s.mode == "" {
		return strings.Repeat("0", 40)
	}
	return gitBlobID(s.content)
}

func (s side) binary() bool {
	return s.big || bytes.IndexByte(s.content[:min(len(s.content), 8000)], 0) >= 0
}

func patchOf(a, b *Tx, c Change) (FilePatch, error) {
	if c.Kind == Renamed {
		return renamePatch(a, b, c)
	}
	p := c.Path
	fp := FilePatch{Path: p}
	memo := chunkMemo{}
	sa, err := gitSide(a, p, true, memo)
	if err != nil {
		return fp, err
	}
	sb, err := gitSide(b, p, true, memo)
	if err != nil {
		return fp, err
	}
	fp.SizeBefore, fp.SizeAfter = sa.size, sb.size
	fp.Binary = sa.binary() || sb.binary()
	var w strings.Builder
	switch {
	case sa.mode == "" && sb.mode == "":
		return fp, nil
	case sa.mode != "" && sb.mode != "" && (sa.mode == "120000") != (sb.mode == "120000"):
		// A file became a symlink or back: git writes a deletion and an addition.
		fp.section(&w, p, sa, side{})
		fp.section(&w, p, side{}, sb)
	default:
		fp.section(&w, p, sa, sb)
	}
	fp.Text = w.String()
	return fp, nil
}

// renamePatch is the patch of a rename: its content is read only when it
// changed, which the chunk hashes tell.
func renamePatch(a, b *Tx, c Change) (FilePatch, error) {
	fp := FilePatch{Path: c.Path, From: c.From}
	ka, err := contentKey(a, c.From)
	if err != nil {
		return fp, err
	}
	kb, err := contentKey(b, c.Path)
	if err != nil {
		return fp, err
	}
	same := ka == kb
	memo := chunkMemo{}
	sa, err := gitSide(a, c.From, !same, memo)
	if err != nil {
		return fp, err
	}
	sb, err := gitSide(b, c.Path, !same, memo)
	if err != nil {
		return fp, err
	}
	fp.SizeBefore, fp.SizeAfter = sa.size, sb.size
	sim := 100
	if !same {
		fp.Binary = sa.binary() || sb.binary()
		sim = min(99, similarity(lineCounts(sa.content), lineCounts(sb.content), sa.size, sb.size))
	}
	var w strings.Builder
	fp.rename(&w, c.From, c.Path, sa, sb, sim, same)
	fp.Text = w.String()
	return fp, nil
}

// section writes one "diff --git" section from a to b (either may be
// absent: mode "").
func (fp *FilePatch) section(w *strings.Builder, p string, a, b side) {
	rel := strings.TrimPrefix(p, "/")
	nameA, nameB := quoteGit("a/"+rel), quoteGit("b/"+rel)
	same := a.mode != "" && b.mode != "" && !a.big && !b.big && bytes.Equal(a.content, b.content)
	if same && a.mode == b.mode {
		return
	}
	fmt.Fprintf(w, "diff --git %s %s\n", nameA, nameB)
	switch {
	case a.mode == "":
		fmt.Fprintf(w, "new file mode %s\n", b.mode)
		nameA = "/dev/null"
	case b.mode == "":
		fmt.Fprintf(w, "deleted file mode %s\n", a.mode)
		nameB = "/dev/null"
	case a.mode != b.mode:
		fmt.Fprintf(w, "old mode %s\nnew mode %s\n", a.mode, b.mode)
	}
	if same || (len(a.content) == 0 && len(b.content) == 0 && !a.big && !b.big) {
		return
	}
	fp.body(w, nameA, nameB, a, b)
}

// rename writes the section of a rename from old to p, with similarity
// sim; same: the content is the same, and only the header is written.
func (fp *FilePatch) rename(w *strings.Builder, old, p string, a, b side, sim int, same bool) {
	ro, rp := strings.TrimPrefix(old, "/"), strings.TrimPrefix(p, "/")
	nameA, nameB := quoteGit("a/"+ro), quoteGit("b/"+rp)
	fmt.Fprintf(w, "diff --git %s %s\n", nameA, nameB)
	fmt.Fprintf(w, "similarity index %d%%\nrename from %s\nrename to %s\n", sim, quoteGit(ro), quoteGit(rp))
	if a.mode != b.mode {
		fmt.Fprintf(w, "old mode %s\nnew mode %s\n", a.mode, b.mode)
	}
	if !same {
		fp.body(w, nameA, nameB, a, b)
	}
}

// body writes the content change from a to b of a section whose header
// is written: a binary patch, or the hunks.
func (fp *FilePatch) body(w *strings.Builder, nameA, nameB string, a, b side) {
	if a.binary() || b.binary() {
		if a.big || b.big {
			fmt.Fprintf(w, "Binary files %s and %s differ\n", nameA, nameB)
			return
		}
		fmt.Fprintf(w, "index %s..%s\n", a.blobID(), b.blobID())
		writeBinaryPatch(w, a.content, b.content)
		return
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", nameA, nameB)
	ins, del := writeHunks(w, a.content, b.content)
	fp.Insertions += ins
	fp.Deletions += del
}

// quoteGit quotes a path name as git does when it holds a byte git will
// not print bare (core.quotePath): C escapes and octal, in double quotes.
func quoteGit(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// splitLines cuts text after each newline; the last line may lack one.
func splitLines(text []byte) []string {
	var out []string
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n') + 1
		if i == 0 {
			i = len(text)
		}
		out = append(out, string(text[:i]))
		text = text[i:]
	}
	return out
}

// lineOp is one line of an edit script: ' ' kept, '-' deleted, '+' inserted.
type lineOp struct {
	op   byte
	line string
}

// lineDiff is the edit script from a to b, line by line. Each distinct
// line becomes one rune (skipping the surrogates, which a Go string cannot
// hold), and go-diff's Myers diff runs on the runes.
func lineDiff(a, b []string) []lineOp {
	ids := map[string]rune{}
	var lines []string
	enc := func(ls []string) []rune {
		rs := make([]rune, len(ls))
		for i, l := range ls {
			r, ok := ids[l]
			if !ok {
				r = rune(len(lines))
				if r >= 0xd800 {
					r += 0x800
				}
				ids[l] = r
				lines = append(lines, l)
			}
			rs[i] = r
		}
		return rs
	}
	ra, rb := enc(a), enc(b)
	dec := func(r rune) string {
		if r >= 0xd800 {
			r -= 0x800
		}
		return lines[r]
	}
	// Past its time limit (1 s) go-diff returns a longer script, still
	// exact: a patch stays right, only less minimal.
	dmp := diffmatchpatch.New()
	var ops []lineOp
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		op := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = '-'
		case diffmatchpatch.DiffInsert:
			op = '+'
		}
		for _, r := range d.Text {
			ops = append(ops, lineOp{op, dec(r)})
		}
	}
	return ops
}

// writeHunks writes the unified hunks from a to b with git's three lines
// of context, and returns the lines inserted and deleted.
func writeHunks(w *strings.Builder, a, b []byte) (ins, del int) {
	la, lb := splitLines(a), splitLines(b)
	if len(la)+len(lb) >= 0x10ffff-0x800 {
		w.WriteString("(too many lines to compare)\n") // unreachable below MaxTextDiff's line count
		return 0, 0
	}
	ops := lineDiff(la, lb)
	// posA[i], posB[i]: the line numbers (0-based) before op i.
	posA, posB := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for i, o := range ops {
		posA[i+1], posB[i+1] = posA[i], posB[i]
		if o.op != '+' {
			posA[i+1]++
		}
		if o.op != '-' {
			posB[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		if ops[i].op == ' ' {
			i++
			continue
		}
		start := max(0, i-patchContext)
		end := i // one past the last changed op of the hunk
		for j := i; j < len(ops); j++ {
			if ops[j].op != ' ' {
				end = j + 1
			} else if j-end >= 2*patchContext {
				break
			}
		}
		stop := min(len(ops), end+patchContext)
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(posA[start], posA[stop]-posA[start]), hunkRange(posB[start], posB[stop]-posB[start]))
		for _, o := range ops[start:stop] {
			w.WriteByte(o.op)
			w.WriteString(o.line)
			if !strings.HasSuffix(o.line, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
			switch o.op {
			case '+':
				ins++
			case '-':
				del++
			}
		}
		i = stop
	}
	return ins, del
}

// hunkRange is a hunk header's "start,count" as git writes it: an empty
// range starts at the line before it, a count of one is left out.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return strconv.Itoa(start) + ",0"
	case 1:
		return strconv.Itoa(start + 1)
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(count)
}
