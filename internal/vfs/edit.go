package vfs

import (
	"bytes"
	"fmt"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Edit is one exact search and replace in a file's content.
type Edit struct {
	Old string `json:"old_text" jsonschema:"the exact text to replace; it must occur once unless replace_all is set"`
	New string `json:"new_text" jsonschema:"the text that replaces it"`
	All bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of exactly one"`
}

// ApplyEdits applies edits to content in order, each to the result of the
// one before, and returns the new content and how many replacements each
// made. An edit whose text is empty, missing, or found more than once
// without All is InvalidInput, and then nothing is applied: an agent's
// edit either lands exactly where it meant or not at all.
func ApplyEdits(content []byte, edits []Edit) ([]byte, []int, error) {
	if len(edits) == 0 {
		return nil, nil, errs.New(errs.InvalidInput, "edit", "give at least one edit")
	}
	counts := make([]int, len(edits))
	for i, e := range edits {
		if e.Old == "" {
			return nil, nil, errs.New(errs.InvalidInput, "edit", "edit %d: old_text is empty", i+1)
		}
		n := bytes.Count(content, []byte(e.Old))
		switch {
		case n == 0:
			return nil, nil, &errs.Error{Kind: errs.InvalidInput, Op: "edit", Err: fmt.Errorf("edit %d: old_text not found", i+1),
				Hint: "old_text must match the file exactly, whitespace included"}
		case n > 1 && !e.All:
			return nil, nil, &errs.Error{Kind: errs.InvalidInput, Op: "edit", Err: fmt.Errorf("edit %d: old_text occurs %d times", i+1, n),
				Hint: "add context to old_text so that it occurs once, or set replace_all"}
		}
		if e.All {
			content = bytes.ReplaceAll(content, []byte(e.Old), []byte(e.New))
		} else {
			content = bytes.Replace(content, []byte(e.Old), []byte(e.New), 1)
		}
		counts[i] = n
	}
	return content, counts, nil
}

// EditFile applies edits to the regular file at p (following symlinks)
// and writes the result, unless dryRun. It returns the content before and
// after.
func (t *Tx) EditFile(p string, edits []Edit, dryRun bool) (before, after []byte, counts []int, err error) {
	a, err := t.Resolve(p, true)
	if err != nil {
		return nil, nil, nil, err
	}
	if a.Type != TypeFile {
		return nil, nil, nil, &errs.Error{Kind: errs.NotAFile, Op: "edit", Path: p, Err: fmt.Errorf("not a regular file")}
	}
	before, err = t.ReadFile(p)
	if err != nil {
		return nil, nil, nil, err
	}
	after, counts, err = ApplyEdits(bytes.Clone(before), edits)
	if err != nil || dryRun {
		return before, after, counts, err
	}
	_, err = t.WriteFile(p, after, a.Mode)
	return before, after, counts, err
}
