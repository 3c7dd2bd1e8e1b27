package vfs_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// An edit either lands exactly where it meant or changes nothing.
func TestEditFile(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.update(func(tx *vfs.Tx) error {
			_, err := tx.WriteFile("/a.txt", []byte("one two two\n"), 0o640)
			return err
		})
		for _, bad := range [][]vfs.Edit{
			nil,
			{{Old: "", New: "x"}},
			{{Old: "one", New: "1"}, {Old: "three", New: "3"}}, // the second fails: the first is not kept
			{{Old: "two", New: "2"}},                           // twice, without All
		} {
			err := f.v.Update(func(tx *vfs.Tx) error {
				_, _, _, err := tx.EditFile("/a.txt", bad, false)
				return err
			})
			if !errs.Is(err, errs.InvalidInput) {
				t.Errorf("edits %v: %v, want InvalidInput", bad, err)
			}
		}
		var after []byte
		f.update(func(tx *vfs.Tx) (err error) {
			_, after, _, err = tx.EditFile("/a.txt", []vfs.Edit{{Old: "two", New: "2", All: true}, {Old: "one 2", New: "1 2"}}, true)
			return err
		})
		if string(after) != "1 2 2\n" {
			t.Errorf("dry run result %q", after)
		}
		f.update(func(tx *vfs.Tx) error {
			if b, _ := tx.ReadFile("/a.txt"); string(b) != "one two two\n" {
				t.Errorf("after the refused edits and a dry run: %q", b)
			}
			_, _, n, err := tx.EditFile("/a.txt", []vfs.Edit{{Old: "two", New: "2", All: true}}, false)
			if err != nil || n[0] != 2 {
				t.Errorf("edit: %v %v", n, err)
			}
			a, _ := tx.Resolve("/a.txt", true)
			if b, _ := tx.ReadFile("/a.txt"); string(b) != "one 2 2\n" || a.Mode&0o777 != 0o640 {
				t.Errorf("edited: %q, mode %o", b, a.Mode)
			}
			if _, _, _, err := tx.EditFile("/", []vfs.Edit{{Old: "a", New: "b"}}, false); !errs.Is(err, errs.NotAFile) {
				t.Errorf("an edit of a directory: %v", err)
			}
			return nil
		})
	})
}

// Search finds lines of text files in path order, skips binary files,
// keeps the start of a long line, stops at max and stops at a cycle.
func TestSearch(t *testing.T) {
	f := newVault(t, "sqlite")
	long := "needle " + strings.Repeat("x", 100<<10)
	f.update(func(tx *vfs.Tx) error {
		for p, c := range map[string]string{"/b/2.txt": "no\nneedle two\r\n", "/a.txt": "needle one", "/b/1.bin": "needle\x00",
			"/c.txt": long + "\nneedle last\n"} {
			if _, err := tx.MkdirAll("/b", 0o755); err != nil {
				return err
			}
			if _, err := tx.WriteFile(p, []byte(c), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	err := f.v.View(func(tx *vfs.Tx) error {
		m, trunc, err := tx.Search("/", regexp.MustCompile("needle"), 0)
		if err != nil || trunc {
			t.Fatal(err, trunc)
		}
		var got []string
		for _, x := range m {
			got = append(got, x.Path+":"+string(rune('0'+x.Line))+":"+x.Text[:min(len(x.Text), 12)])
		}
		want := []string{"/a.txt:1:needle one", "/b/2.txt:2:needle two", "/c.txt:1:needle xxxxx", "/c.txt:2:needle last"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("search: %v, want %v", got, want)
		}
		if len(m[2].Text) != vfs.MaxMatchLine {
			t.Errorf("a long line kept %d bytes", len(m[2].Text))
		}
		m, trunc, err = tx.Search("/b", regexp.MustCompile("needle"), 1)
		if err != nil || !trunc || len(m) != 1 {
			t.Errorf("max 1 below /b: %v %v %v", m, trunc, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, v := cycleVault(t, "sqlite")
	err = v.View(func(tx *vfs.Tx) error {
		_, _, err := tx.Search("/", regexp.MustCompile("x"), 0)
		return err
	})
	wantCycle(t, "Search", err)
}
