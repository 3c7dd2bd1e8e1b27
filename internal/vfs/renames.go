package vfs

import (
	"cmp"
	"path"
	"slices"
	"strings"
)

// Renamed is a regular file deleted at From and added at Path with the
// same content, or content similar enough (see FindRenames). Diff never
// returns it; FindRenames pairs Diff's deletions and additions into it.
const Renamed ChangeKind = "renamed"

// RenameThreshold is the similarity, in percent, from which a deleted and
// an added file are one rename with edits: git's default (-M50%).
const RenameThreshold = 50

// maxSimilarFiles bounds the files compared by content for renames with
// edits, on each side, and maxSimilarSize their size: beyond them only
// renames of identical content are found, which cost no read at all.
const (
	maxSimilarFiles = 256
	maxSimilarSize  = 1 << 20
)

// FindRenames returns changes (as Diff returns them, sorted by path) with
// each pair of a deleted and an added regular file that is one rename
// replaced by a single Renamed change at the new path, From naming the
// old one. A pair with the same content is found from the chunk hashes
// alone, without reading data; the files left unpaired are compared by
// lines, as git's -M does, when there are at most maxSimilarFiles of each
// of at most maxSimilarSize. Empty files are never paired: git would
// not show them as renames either.
func FindRenames(from, to StateRef, changes []Change) ([]Change, error) {
	var out []Change
	err := from.view(func(a *Tx) error {
		return to.view(func(b *Tx) (err error) {
			out, err = renamesIn(a, b, changes)
			return err
		})
	})
	return out, err
}

func renamesIn(a, b *Tx, changes []Change) ([]Change, error) {
	var dels, adds []int
	for i, c := range changes {
		if c.Type != TypeFile.String() || c.From != "" {
			continue
		}
		switch {
		case c.Kind == Deleted && c.SizeBefore > 0:
			dels = append(dels, i)
		case c.Kind == Added && c.SizeAfter > 0:
			adds = append(adds, i)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return changes, nil
	}
	pairs := map[int]int{} // added index → deleted index
	byKey := map[string][]int{}
	for _, i := range dels {
		k, err := contentKey(a, changes[i].Path)
		if err != nil {
			return nil, err
		}
		byKey[k] = append(byKey[k], i)
	}
	var restAdds []int
	for _, i := range adds {
		k, err := contentKey(b, changes[i].Path)
		if err != nil {
			return nil, err
		}
		if cands := byKey[k]; k != "" && len(cands) > 0 {
			j := bestName(changes, cands, changes[i].Path)
			pairs[i] = cands[j]
			byKey[k] = slices.Delete(cands, j, j+1)
			continue
		}
		restAdds = append(restAdds, i)
	}
	paired := map[int]bool{}
	for _, d := range pairs {
		paired[d] = true
	}
	var restDels []int
	for _, i := range dels {
		if !paired[i] {
			restDels = append(restDels, i)
		}
	}
	if err := similarPairs(a, b, changes, restDels, restAdds, pairs); err != nil {
		return nil, err
	}
	gone := map[int]bool{}
	for _, d := range pairs {
		gone[d] = true
	}
	out := make([]Change, 0, len(changes)-len(pairs))
	for i, c := range changes {
		if gone[i] {
			continue
		}
		if d, ok := pairs[i]; ok {
			c.Kind, c.From, c.SizeBefore = Renamed, changes[d].Path, changes[d].SizeBefore
		}
		out = append(out, c)
	}
	return out, nil
}

// bestName picks among the deleted changes cands the one to pair with the
// added path p: the first with p's base name, else the first.
func bestName(changes []Change, cands []int, p string) int {
	for j, i := range cands {
		if path.Base(changes[i].Path) == path.Base(p) {
			return j
		}
	}
	return 0
}

// contentKey names a regular file's content by its size and chunk
// hashes ("" when p is not a regular file): equal keys, equal content.
func contentKey(t *Tx, p string) (string, error) {
	n, err := lookupNoFollow(t, p)
	if err != nil || n == nil || n.Type != TypeFile {
		return "", err
	}
	var b strings.Builder
	b.WriteString(string(u64(nil, n.Size)))
	hole := strings.Repeat("\x00", 32)
	for i := uint64(0); i*ChunkSize < n.Size; i++ {
		ref, _, ok, err := t.chunkRef(n, i)
		if err != nil {
			return "", err
		}
		if !ok {
			b.WriteString(hole)
			continue
		}
		b.Write(ref)
	}
	return b.String(), nil
}

// similarPairs pairs the deleted and added files left, by the share of
// their bytes in common lines, best scores first, when they are few and
// small enough to read.
func similarPairs(a, b *Tx, changes []Change, dels, adds []int, pairs map[int]int) error {
	if len(dels) == 0 || len(adds) == 0 || len(dels) > maxSimilarFiles || len(adds) > maxSimilarFiles {
		return nil
	}
	read := func(t *Tx, i int, size int64) (map[string]int, error) {
		if size > maxSimilarSize {
			return nil, nil
		}
		s, err := gitSide(t, changes[i].Path, true, nil)
		if err != nil || s.binary() {
			return nil, err
		}
		return lineCounts(s.content), nil
	}
	delLines := map[int]map[string]int{}
	for _, i := range dels {
		m, err := read(a, i, changes[i].SizeBefore)
		if err != nil {
			return err
		}
		delLines[i] = m
	}
	type scored struct{ add, del, score int }
	var all []scored
	for _, i := range adds {
		la, err := read(b, i, changes[i].SizeAfter)
		if err != nil || la == nil {
			if err != nil {
				return err
			}
			continue
		}
		for _, d := range dels {
			ld := delLines[d]
			if ld == nil {
				continue
			}
			big, small := max(changes[i].SizeAfter, changes[d].SizeBefore), min(changes[i].SizeAfter, changes[d].SizeBefore)
			if small*100 < big*RenameThreshold {
				continue // too different in size to reach the threshold
			}
			if s := similarity(ld, la, changes[d].SizeBefore, changes[i].SizeAfter); s >= RenameThreshold {
				all = append(all, scored{i, d, s})
			}
		}
	}
	slices.SortStableFunc(all, func(x, y scored) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		sx := path.Base(changes[x.add].Path) == path.Base(changes[x.del].Path)
		sy := path.Base(changes[y.add].Path) == path.Base(changes[y.del].Path)
		if sx != sy {
			if sx {
				return -1
			}
			return 1
		}
		return 0
	})
	used := map[int]bool{}
	for _, s := range all {
		if _, ok := pairs[s.add]; ok || used[s.del] {
			continue
		}
		pairs[s.add] = s.del
		used[s.del] = true
	}
	return nil
}

func lineCounts(content []byte) map[string]int {
	m := map[string]int{}
	for _, l := range splitLines(content) {
		m[l]++
	}
	return m
}

// similarity is the percentage of the larger file's bytes that are in
// lines both files hold: a line-based form of git's similarity index.
func similarity(a, b map[string]int, sizeA, sizeB int64) int {
	if sizeA == 0 && sizeB == 0 {
		return 100
	}
	var common int64
	for l, na := range a {
		common += int64(min(na, b[l]) * len(l))
	}
	return int(common * 100 / max(sizeA, sizeB))
}

// ContentDiff is what `avfs diff` shows, for every caller (the CLI, the
// MCP server): Diff with renames paired (FindRenames), and when
// withPatches each change's patch, in the same order, all read from one
// snapshot of each state (a live mount may be writing).
func ContentDiff(from, to StateRef, withPatches bool) (changes []Change, patches []FilePatch, err error) {
	err = from.view(func(a *Tx) error {
		return to.view(func(b *Tx) error {
			changes, err = diffIn(a, b)
			if err == nil {
				changes, err = renamesIn(a, b, changes)
			}
			if err == nil && withPatches {
				patches, err = patchesIn(a, b, changes)
			}
			return err
		})
	})
	return changes, patches, err
}

// PatchText is the patch of all of ps, as `avfs diff --patch` prints it.
func PatchText(ps []FilePatch) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}
