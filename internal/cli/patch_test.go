package cli

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hostTree is what git keeps of a host tree: each file's content and
// execute bit and each symlink's text, by path.
func hostTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %s", fi.Mode()&0o100 != 0, b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// realRepos are modules of the module cache (the build's own
// dependencies, so there) whose files the real-git tests edit.
var realRepos = []string{"spf13/cobra@*", "spf13/pflag@*", "sergi/go-diff@*", "rogpeppe/go-internal@*"}

// realRepo copies a Go module from the module cache, the real files of a
// real project, into a temporary directory.
func realRepo(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skip("no go command:", err)
	}
	mods, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "github.com", filepath.FromSlash(module)))
	if len(mods) == 0 {
		t.Skipf("no %s module in the module cache", module)
	}
	dst := filepath.Join(t.TempDir(), "repo")
	if b, err := exec.Command("cp", "-r", mods[0], dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, b)
	}
	if b, err := exec.Command("chmod", "-R", "u+w", dst).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v %s", err, b)
	}
	return dst
}

// editLines changes a text at random: lines replaced, inserted and
// deleted, and sometimes the final newline dropped or added.
func editLines(r *rand.Rand, text string) string {
	lines := strings.SplitAfter(text, "\n")
	for range 1 + r.IntN(6) {
		i := r.IntN(len(lines) + 1)
		switch r.IntN(3) {
		case 0:
			lines = slices.Insert(lines, i, fmt.Sprintf("inserted %d\n", r.IntN(1000)))
		case 1:
			if i < len(lines) {
				lines = slices.Delete(lines, i, i+1)
			}
		default:
			if i < len(lines) {
				lines[i] = fmt.Sprintf("replaced %d\n", r.IntN(1000))
			}
		}
	}
	s := strings.Join(lines, "")
	if r.IntN(8) == 0 {
		s = strings.TrimSuffix(s, "\n")
	}
	return s
}

// git apply of avfs diff --patch, on an export of FROM, gives the export
// of TO: random edits of a fork of a real repository.
func TestPatchAppliesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for seed := range uint64(len(realRepos)) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			repo := realRepo(t, realRepos[seed])
			r := newRunner(t)
			rng := rand.New(rand.NewPCG(seed, 15))
			host := filepath.Join(t.TempDir(), "host")
			if b, err := exec.Command("cp", "-a", repo, host).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, b)
			}
			// A binary file and a symlink in the base, changed by the fork.
			if err := os.WriteFile(filepath.Join(host, "logo.bin"), []byte("\x89PNG\x00\x01\x02 base"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("go.mod", filepath.Join(host, "readme-link")); err != nil {
				t.Fatal(err)
			}
			r.ok("vault", "create", "base", "--use", "--from", host)
			r.ok("vault", "fork", "base", "task", "--use")
			files := []string{}
			for p, v := range hostTree(t, repo) {
				if strings.HasPrefix(v, "file ") {
					files = append(files, "/"+filepath.ToSlash(p))
				}
			}
			slices.Sort(files)
			// Renames: one with the same content, one with edits and a new
			// mode, a binary file's; a binary file and a symlink changed.
			var md, goFile string
			for _, f := range files {
				if md == "" && strings.HasSuffix(f, ".md") {
					md = f
				}
				if goFile == "" && strings.HasSuffix(f, ".go") && strings.Count(r.ok("cat", f), "\n") > 10 {
					goFile = f
				}
			}
			if md == "" || goFile == "" {
				t.Fatalf("%s has no .md file or no .go file of more than 10 lines", realRepos[seed])
			}
			r.ok("mv", md, "/moved-"+strings.TrimPrefix(md, "/"))
			r.ok("mv", goFile, "/cmd-moved.go")
			r.ok("write", "/cmd-moved.go", r.ok("cat", "/cmd-moved.go")+"// one more line\n")
			r.ok("chmod", "u+x", "/cmd-moved.go")
			r.ok("write", "/logo.bin", "\x89PNG\x00\x01\x02 fork")
			r.ok("mv", "/logo.bin", "/logo-moved.bin")
			r.ok("rm", "/readme-link")
			r.ok("ln", "-s", "docs-readme.md", "/readme-link")
			for i := range 30 {
				f := files[rng.IntN(len(files))]
				switch rng.IntN(8) {
				case 0, 1, 2:
					code, out, errOut := r.run("", "cat", f)
					if code != 0 {
						continue // gone already
					}
					if c, o, e := r.run(editLines(rng, out), "write", f); c != 0 {
						t.Fatalf("write %s: %s%s%s", f, o, e, errOut)
					}
				case 3:
					r.run("", "rm", f)
				case 4:
					r.run("", "chmod", []string{"u+x", "a-x"}[rng.IntN(2)], f)
				case 5:
					r.ok("write", fmt.Sprintf("/new %d.txt", i), editLines(rng, "a\nb\nc\n"))
				case 6:
					r.ok("ln", "-s", strings.TrimPrefix(f, "/"), fmt.Sprintf("/link%d", i))
				case 7:
					r.run("", "mv", f, f+".moved")
				}
			}
			r.ok("write", "/empty-new", "")
			r.ok("write", "/na\u00efve\tname \"q\".txt", "quoted\n")
			r.ok("write", "/bin.dat", "\x00\x01binary\xff")
			patch := r.ok("diff", "vault:base", "vault:task", "--patch")
			md, goFile = strings.TrimPrefix(md, "/"), strings.TrimPrefix(goFile, "/")
			for _, want := range []string{"rename from " + md + "\nrename to moved-" + md + "\n",
				"rename from " + goFile + "\nrename to cmd-moved.go\nold mode 100644\nnew mode 100755\n--- a/" + goFile + "\n", "GIT binary patch"} {
				if !strings.Contains(patch, want) {
					t.Errorf("the patch lacks %q", want)
				}
			}
			from, to := t.TempDir(), t.TempDir()
			r.ok("export", "/", from, "--at", "vault:base")
			r.ok("export", "/", to, "--at", "vault:task")
			pf := filepath.Join(t.TempDir(), "p.diff")
			if err := os.WriteFile(pf, []byte(patch), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("git", "apply", "--whitespace=nowarn", pf)
			cmd.Dir = from
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, b, patch)
			}
			want := hostTree(t, to)
			sameTree(t, "git apply", hostTree(t, from), want)

			// avfs apply into the directory the base came from gives the
			// same tree; a host file edited meanwhile is a conflict, left
			// as it is.
			var edited string
			list := r.ok("diff", "vault:base", "vault:task", "--json")
			for _, f := range files {
				if strings.Contains(list, `"path": "`+f+`",`+"\n"+`      "kind": "modified"`) {
					edited = strings.TrimPrefix(f, "/")
					break
				}
			}
			if edited == "" {
				t.Fatal("no file the fork modified to edit on the host")
			}
			if edited != "" {
				if err := os.WriteFile(filepath.Join(host, edited), []byte("edited on the host\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := r.ok("apply", host, "--json")
			got := hostTree(t, host)
			if edited != "" {
				if !strings.Contains(out, `"path": "/`+edited+`",`) || !strings.Contains(out, "changed since") {
					t.Errorf("the host edit of %s is not a conflict:\n%s", edited, out)
				}
				if !strings.HasSuffix(got[edited], " edited on the host\n") {
					t.Errorf("avfs apply overwrote %s: %.100q", edited, got[edited])
				}
				got[edited] = want[edited]
			}
			sameTree(t, "avfs apply", got, want)
			if out := r.ok("apply", host, "--json"); !strings.Contains(out, `"applied": []`) {
				t.Errorf("a second apply applied something:\n%s", out)
			}
		})
	}
}

func sameTree(t *testing.T, how string, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s after %s:\n%.200q\nwant\n%.200q", p, how, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s is left after %s", p, how)
		}
	}
}
