// Package guidetest holds what the guides' example tests share.
package guidetest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Snippets checks that every code block of the given language in the
// guide is part of the example source, so the guide shows code that runs.
func Snippets(t *testing.T, guide, source, lang string) {
	t.Helper()
	g, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```"+regexp.QuoteMeta(lang)+"\n(.*?)```").FindAllSubmatch(g, -1)
	if len(blocks) < 3 {
		t.Fatalf("%s has %d %s blocks", guide, len(blocks), lang)
	}
	for _, b := range blocks {
		if !strings.Contains(string(src), string(b[1])) {
			t.Errorf("this block of %s is not in %s:\n%s", guide, source, b[1])
		}
	}
}
