package proxy_test

import (
	"reflect"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// TestRenamesAlikeOnBothTransports: a move, an edit and a move, and a
// directory move give the same change list through FUSE (where the moved
// file keeps its inode) and overlay (where the ingest makes it a new
// one): renames are paired by content, as `avfs diff` pairs them.
func TestRenamesAlikeOnBothTransports(t *testing.T) {
	t.Parallel()
	const seed = `printf 'a1\na2\na3\na4\n' > a.txt; printf 'b1\nb2\nb3\nb4\nb5\nb6\nb7\nb8\n' > b.txt; ` +
		`mkdir d; echo x > d/x; echo y > d/y`
	const moves = `mv a.txt a2.txt; mv b.txt b2.txt; echo b9 >> b2.txt; mv d e`
	lists := map[string][]string{}
	for _, tr := range []string{"fuse", "overlay"} {
		e := newEnv(t)
		e.exec(0, "", "--transport", "fuse", "--shell", seed)
		r := e.exec(0, "", "--transport", tr, "--shell", moves).Result
		if r.Transport == nil || *r.Transport != tr {
			t.Fatalf("%s run served by %v", tr, r.Transport)
		}
		lists[tr] = changeList(r.Changes)
		if !r.RenamesDetected || r.Summary == nil || r.Summary.Renamed != 4 {
			t.Errorf("%s: renames_detected %v, summary %+v", tr, r.RenamesDetected, r.Summary)
		}
	}
	want := []string{
		"/a2.txt renamed from /a.txt",
		"/b2.txt renamed from /b.txt",
		"/d deleted",
		"/e added",
		"/e/x renamed from /d/x",
		"/e/y renamed from /d/y",
	}
	for tr, got := range lists {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s changes:\n%q\nwant\n%q", tr, got, want)
		}
	}
}

func changeList(cs []proxy.Change) []string {
	var out []string
	for _, c := range cs {
		s := c.Path + " " + c.Kind
		if c.From != nil {
			s += " from " + *c.From
		}
		out = append(out, s)
	}
	return out
}
