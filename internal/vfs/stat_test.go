package vfs

import "testing"

// renameName names renames as git's --stat does (checked against git
// 2.39's output for each row).
func TestRenameName(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"new.sh", "d/run.sh", "new.sh => d/run.sh"},
		{"src/a/f.go", "src/b.go", "src/{a/f.go => b.go}"},
		{"a/x/f.go", "b/x/f.go", "{a => b}/x/f.go"},
		{"c/d/g.txt", "c/e/g.txt", "c/{d => e}/g.txt"},
		{"top.txt", "c/top2.txt", "top.txt => c/top2.txt"},
		{"d x.txt", "e x.txt", "d x.txt => e x.txt"},
		{"a\tb", "c", `"a\tb" => c`},
	} {
		if got := renameName(c.a, c.b); got != c.want {
			t.Errorf("renameName(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
