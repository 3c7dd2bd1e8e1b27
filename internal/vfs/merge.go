package vfs

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// OnConflict says what a merge does with a path both sides changed
// differently.
type OnConflict string

// The conflict policies.
const (
	ConflictFail    OnConflict = "fail"    // change nothing when anything conflicts
	ConflictOurs    OnConflict = "ours"    // keep the target's version
	ConflictTheirs  OnConflict = "theirs"  // take the source's version
	ConflictMarkers OnConflict = "markers" // git-style markers in text files; the target's version otherwise
)

// The kinds of merge conflict.
const (
	BothModified = "both_modified"
	ModifyDelete = "modify_delete"
	AddAdd       = "add_add"
	TypeConflict = "type_changed"
)

// MergeApplied is one path a merge changed in the target.
type MergeApplied struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // added, modified, deleted, mode_changed, type_changed, merged (lines of both sides), markers
}

// MergeConflict is one path both sides changed differently. Ours and
// Theirs say what each side did there: added, modified, deleted,
// mode_changed or type_changed.
type MergeConflict struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Ours   string `json:"ours"`
	Theirs string `json:"theirs"`
}

// MergeResult is what a merge did, or with DryRun would do.
type MergeResult struct {
	Source     string          `json:"source"`
	Target     string          `json:"target"`
	Base       string          `json:"base"` // vault:NAME#LAYER, the common ancestor state
	Applied    []MergeApplied  `json:"applied"`
	Conflicts  []MergeConflict `json:"conflicts"`
	Checkpoint *string         `json:"checkpoint"` // the target's checkpoint taken first; null when nothing changed
	Merged     bool            `json:"merged"`     // the target holds the merge (false: dry run, fail on conflicts, or nothing to do)
	DryRun     bool            `json:"dry_run"`
}

// snap is what a state holds at a path, as a merge compares it.
type snap struct {
	ok      bool
	typ     FileType
	mode    uint32
	content []byte // file data or symlink text
}

func (s snap) equal(o snap) bool {
	return s.ok == o.ok && (!s.ok || s.typ == o.typ && s.mode == o.mode && bytes.Equal(s.content, o.content))
}

func readSnap(t *Tx, p string) (snap, error) {
	n, err := lookupNoFollow(t, p)
	if err != nil || n == nil {
		return snap{}, err
	}
	s := snap{ok: true, typ: n.Type, mode: n.Mode & 0o7777}
	switch n.Type {
	case TypeSymlink:
		s.content = []byte(n.target)
	case TypeFile:
		s.content = make([]byte, n.Size)
		for off := 0; off < len(s.content); {
			k, err := t.Read(n.Ino, int64(off), s.content[off:])
			if err != nil {
				return s, err
			}
			if k == 0 {
				s.content = s.content[:off]
				break
			}
			off += k
		}
	}
	return s, nil
}

// mergeBase finds the common ancestor of two vaults' working states: the
// newest layer of one file that both chains read.
func mergeBase(src, dst *Vault) (StateRef, error) {
	var base StateRef
	err := src.View(func(a *Tx) error {
		return dst.View(func(b *Tx) error {
			for _, sa := range a.c.segs {
				for _, sb := range b.c.segs {
					if sa.v.ID() != sb.v.ID() {
						continue
					}
					var best uint64
					for l := range sa.layers {
						if sb.layers[l] && l > best {
							best = l
						}
					}
					if best != 0 {
						base = StateRef{Vault: sb.v, layer: best}
						return nil
					}
				}
			}
			return nil
		})
	})
	if err == nil && base.Vault == nil {
		err = &errs.Error{Kind: errs.InvalidInput, Op: "vault merge",
			Err:  fmt.Errorf("vaults %q and %q share no ancestor state", src.Name(), dst.Name()),
			Hint: "merge a fork into its parent, or vaults forked from one another"}
	}
	return base, err
}

// step is one planned change of the target.
type step struct {
	path string
	to   snap // what the target gets at path (ok false: removed)
	kind string
}

// MergeTarget is the vault a merge of src goes into: into, or src's parent
// when into is empty (InvalidInput when src is not a fork). A merge of a
// vault into itself is InvalidInput.
func MergeTarget(src *Vault, into string) (string, error) {
	if into == "" {
		parent, _, ok, err := src.Base()
		if err != nil {
			return "", err
		}
		if !ok {
			return "", &errs.Error{Kind: errs.InvalidInput, Op: "vault merge", Vault: src.Name(),
				Err: fmt.Errorf("vault %q is not a fork", src.Name()), Hint: "name the vault to merge into with --into"}
		}
		into = parent
	}
	if into == src.Name() {
		return "", errs.New(errs.InvalidInput, "vault merge", "cannot merge vault %q into itself", into)
	}
	return into, nil
}

// Merge merges the working state of src into dst's, from their common
// ancestor. Paths only src changed take src's version; the same change on
// both sides is no conflict; text files both changed merge by lines. dst
// is checkpointed first and changed in one transaction, so a crash leaves
// it as it was or fully merged, and `checkpoint restore` of
// res.Checkpoint undoes the merge. Extended attributes and hard links are
// not merged (a file's names merge as separate files).
func Merge(src, dst *Vault, on OnConflict, dryRun bool) (*MergeResult, error) {
	switch on {
	case ConflictFail, ConflictOurs, ConflictTheirs, ConflictMarkers:
	default:
		return nil, errs.New(errs.InvalidInput, "vault merge", "--on-conflict must be fail, ours, theirs or markers, not %q", on)
	}
	base, err := mergeBase(src, dst)
	if err != nil {
		return nil, err
	}
	res := &MergeResult{Source: src.Name(), Target: dst.Name(), Base: fmt.Sprintf("vault:%s#%d", base.Vault.Name(), base.layer),
		Applied: []MergeApplied{}, Conflicts: []MergeConflict{}, DryRun: dryRun}
	ours, theirs := StateRef{Vault: dst}, StateRef{Vault: src}
	tc, err := Diff(base, theirs)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(tc))
	for _, c := range tc {
		paths = append(paths, c.Path)
	}
	snaps := make([][3]snap, len(paths)) // base, ours, theirs
	for i, st := range []StateRef{base, ours, theirs} {
		err := st.View(func(t *Tx) error {
			for j, p := range paths {
				s, err := readSnap(t, p)
				if err != nil {
					return err
				}
				snaps[j][i] = s
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	planned := map[string]bool{} // paths the plan removes
	var steps []step
	for j, p := range paths {
		b, o, t := snaps[j][0], snaps[j][1], snaps[j][2]
		switch {
		case t.equal(b), o.equal(t):
			continue
		case o.equal(b):
			steps = append(steps, step{path: p, to: t, kind: changeKind(b, t)})
			continue
		}
		c := MergeConflict{Path: p, Ours: changeKind(b, o), Theirs: changeKind(b, t)}
		switch {
		case !b.ok:
			c.Kind = AddAdd
		case !o.ok || !t.ok:
			c.Kind = ModifyDelete
		case o.typ != t.typ:
			c.Kind = TypeConflict
		default:
			c.Kind = BothModified
		}
		mode, modeOK := merge3(b.mode, o.mode, t.mode)
		if c.Kind == BothModified && o.typ == TypeFile && isText(b.content, o.content, t.content) {
			text, clean := mergeLines(b.content, o.content, t.content, dst.Name(), src.Name())
			if clean && modeOK {
				if to := (snap{ok: true, typ: TypeFile, mode: mode, content: text}); !to.equal(o) {
					steps = append(steps, step{path: p, to: to, kind: "merged"})
				}
				continue
			}
			if on == ConflictMarkers {
				steps = append(steps, step{path: p, to: snap{ok: true, typ: TypeFile, mode: o.mode, content: text}, kind: "markers"})
			}
		} else if c.Kind == BothModified && o.typ == TypeDir && modeOK {
			if mode != o.mode {
				steps = append(steps, step{path: p, to: snap{ok: true, typ: TypeDir, mode: mode}, kind: "mode_changed"})
			}
			continue
		}
		if on == ConflictTheirs {
			steps = append(steps, step{path: p, to: t, kind: changeKind(o, t)})
		}
		res.Conflicts = append(res.Conflicts, c)
	}
	for _, s := range steps {
		if !s.to.ok {
			planned[s.path] = true
		}
	}
	// A directory the source removed goes only when everything the
	// target holds in it goes too.
	err = ours.View(func(t *Tx) error {
		return checkDirRemovals(t, steps, planned, res, on)
	})
	if err != nil {
		return nil, err
	}
	steps = slices.DeleteFunc(steps, func(s step) bool { return s.kind == "" })
	for _, s := range steps {
		res.Applied = append(res.Applied, MergeApplied{Path: s.path, Kind: s.kind})
	}
	if dryRun || len(steps) == 0 || (on == ConflictFail && len(res.Conflicts) > 0) {
		return res, nil
	}
	name := "before-merge-" + src.Name() + "-" + time.Now().UTC().Format("20060102T150405.000000000")
	if _, err := dst.SaveCheckpoint(name, "before merging "+src.Name()); err != nil {
		return nil, err
	}
	err = dst.Update(func(t *Tx) error { return applySteps(t, steps) })
	if err != nil {
		_ = dst.DeleteCheckpoint(name)
		return nil, err
	}
	res.Checkpoint, res.Merged = &name, true
	return res, nil
}

// checkDirRemovals turns the removal (or replacement) of a directory that
// keeps an entry the plan does not remove into a modify_delete conflict
// (its kind cleared: the step is dropped).
func checkDirRemovals(t *Tx, steps []step, planned map[string]bool, res *MergeResult, on OnConflict) error {
	for i := len(steps) - 1; i >= 0; i-- {
		s := &steps[i]
		if s.to.ok && s.to.typ == TypeDir {
			continue
		}
		n, err := lookupNoFollow(t, s.path)
		if err != nil {
			return err
		}
		if n == nil || n.Type != TypeDir {
			continue
		}
		ents, err := t.ReadDir(n.Ino)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !planned[joinPath(s.path, e.Name)] {
				res.Conflicts = append(res.Conflicts, MergeConflict{Path: s.path, Kind: ModifyDelete, Ours: "modified", Theirs: "deleted"})
				delete(planned, s.path)
				s.kind = ""
				break
			}
		}
	}
	return nil
}

// applySteps makes the planned changes: removals deepest first, then
// creations and replacements parents first.
func applySteps(t *Tx, steps []step) error {
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		n, err := lookupNoFollow(t, s.path)
		if err != nil {
			return err
		}
		if n == nil || (s.to.ok && s.to.typ == n.Type && n.Type != TypeSymlink) {
			continue
		}
		dir, name, err := t.ResolveParent(s.path)
		if err != nil {
			return err
		}
		if n.Type == TypeDir {
			err = t.Rmdir(dir, name)
		} else {
			err = t.Unlink(dir, name)
		}
		if err != nil {
			return err
		}
	}
	for _, s := range steps {
		if !s.to.ok {
			continue
		}
		if _, err := t.MkdirAll(path.Dir(s.path), 0o755); err != nil {
			return err
		}
		dir, name, err := t.ResolveParent(s.path)
		if err != nil {
			return err
		}
		var a Attr
		switch s.to.typ {
		case TypeDir:
			if a, err = t.Lookup(dir, name); errs.Is(err, errs.NotFound) {
				a, err = t.Mkdir(dir, name, s.to.mode, 0, 0)
			}
		case TypeSymlink:
			a, err = t.Symlink(dir, name, string(s.to.content), 0, 0)
		case TypeFile:
			a, err = t.WriteFile(s.path, s.to.content, s.to.mode)
		default:
			continue // devices, fifos and sockets are not merged
		}
		if err != nil {
			return err
		}
		if s.to.typ != TypeSymlink {
			mode := s.to.mode
			if _, err := t.SetAttr(a.Ino, SetAttr{Mode: &mode}); err != nil {
				return err
			}
		}
	}
	return nil
}

// changeKind names what happened at a path from a to b.
func changeKind(a, b snap) string {
	switch {
	case !a.ok:
		return string(Added)
	case !b.ok:
		return string(Deleted)
	case a.typ != b.typ:
		return string(TypeChanged)
	case !bytes.Equal(a.content, b.content):
		return string(Modified)
	}
	return string(ModeChanged)
}

// merge3 merges one value changed on two sides.
func merge3[T comparable](b, o, t T) (T, bool) {
	switch {
	case o == t, t == b:
		return o, true
	case o == b:
		return t, true
	}
	return o, false
}

func isText(parts ...[]byte) bool {
	for _, p := range parts {
		if len(p) > MaxTextDiff || bytes.IndexByte(p[:min(len(p), 8000)], 0) >= 0 {
			return false
		}
	}
	return true
}

// hunk is one change of a side against the base: base lines [start, end)
// become lines.
type hunk struct {
	start, end int
	lines      []string
}

func hunksOf(ops []lineOp) []hunk {
	var out []hunk
	pos := 0
	for i := 0; i < len(ops); {
		if ops[i].op == ' ' {
			pos++
			i++
			continue
		}
		h := hunk{start: pos, end: pos}
		for ; i < len(ops) && ops[i].op != ' '; i++ {
			if ops[i].op == '-' {
				h.end++
			} else {
				h.lines = append(h.lines, ops[i].line)
			}
		}
		pos = h.end
		out = append(out, h)
	}
	return out
}

// mergeLines is a three-way merge of texts by lines (diff3): regions only
// one side changed take that side's lines; regions both changed alike
// take them once; others become git-style conflict markers. clean is
// false when any marker was written.
func mergeLines(base, ours, theirs []byte, oursName, theirsName string) (merged []byte, clean bool) {
	lb := splitLines(base)
	ho := hunksOf(lineDiff(lb, splitLines(ours)))
	ht := hunksOf(lineDiff(lb, splitLines(theirs)))
	var out strings.Builder
	clean = true
	pos, i, j := 0, 0, 0
	for i < len(ho) || j < len(ht) {
		// The region starts at the earliest hunk and grows while a hunk of
		// either side overlaps or touches it.
		start := 0
		switch {
		case j >= len(ht) || (i < len(ho) && ho[i].start <= ht[j].start):
			start = ho[i].start
		default:
			start = ht[j].start
		}
		end, i2, j2 := start, i, j
		for grew := true; grew; {
			grew = false
			for i2 < len(ho) && ho[i2].start <= end {
				end = max(end, ho[i2].end)
				i2++
				grew = true
			}
			for j2 < len(ht) && ht[j2].start <= end {
				end = max(end, ht[j2].end)
				j2++
				grew = true
			}
		}
		for _, l := range lb[pos:start] {
			out.WriteString(l)
		}
		o := applyHunks(lb, start, end, ho[i:i2])
		t := applyHunks(lb, start, end, ht[j:j2])
		switch {
		case i == i2:
			out.WriteString(strings.Join(t, ""))
		case j == j2 || slices.Equal(o, t):
			out.WriteString(strings.Join(o, ""))
		default:
			clean = false
			fmt.Fprintf(&out, "<<<<<<< %s\n%s=======\n%s>>>>>>> %s\n", oursName, withNewline(o), withNewline(t), theirsName)
		}
		pos, i, j = end, i2, j2
	}
	for _, l := range lb[pos:] {
		out.WriteString(l)
	}
	return []byte(out.String()), clean
}

// applyHunks is base lines [start, end) with the hunks applied.
func applyHunks(lb []string, start, end int, hs []hunk) []string {
	var out []string
	pos := start
	for _, h := range hs {
		out = append(out, lb[pos:h.start]...)
		out = append(out, h.lines...)
		pos = h.end
	}
	return append(out, lb[pos:end]...)
}

// withNewline joins lines so that a marker after them starts a line.
func withNewline(ls []string) string {
	s := strings.Join(ls, "")
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// Snapshot is what a state holds at a path, as merge and apply compare it.
type Snapshot struct {
	Exists  bool
	Type    FileType
	Mode    uint32 // permission bits
	Content []byte // file data or symlink text
}

// Snapshots reads what state r holds at each path, file data whole.
func Snapshots(r StateRef, paths []string) ([]Snapshot, error) {
	out := make([]Snapshot, len(paths))
	err := r.View(func(t *Tx) error {
		for i, p := range paths {
			s, err := readSnap(t, p)
			if err != nil {
				return err
			}
			out[i] = Snapshot{Exists: s.ok, Type: s.typ, Mode: s.mode, Content: s.content}
		}
		return nil
	})
	return out, err
}
