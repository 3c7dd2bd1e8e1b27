package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite docs/cli-reference.md")

// TestReferenceUpToDate fails when docs/cli-reference.md is not what the
// command tree generates. Regenerate with `go run ./internal/cli/gendoc`
// or `go test ./internal/cli -run TestReferenceUpToDate -update`.
func TestReferenceUpToDate(t *testing.T) {
	const file = "../../docs/cli-reference.md"
	want := Reference()
	if *update {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date: run `go run ./internal/cli/gendoc`", file)
	}
}

// TestContractDoc checks that docs/json-contract.md carries the exit code
// table and names every error type.
func TestContractDoc(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/json-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.Contains(doc, ExitCodeTable()) {
		t.Errorf("docs/json-contract.md lacks the current exit code table:\n%s", ExitCodeTable())
	}
	for _, k := range ErrorKinds() {
		if !strings.Contains(doc, "`"+string(k)+"`") {
			t.Errorf("docs/json-contract.md does not name error type %s", k)
		}
	}
}

// TestExitCodes: every kind has one code, and codes are unique per row.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	seen := map[errs.Kind]int{}
	codes := map[int]bool{}
	for _, row := range ExitCodes {
		if codes[row.Code] {
			t.Errorf("exit code %d appears twice", row.Code)
		}
		codes[row.Code] = true
		for _, k := range row.Kinds {
			if c, ok := seen[k]; ok {
				t.Errorf("kind %s has codes %d and %d", k, c, row.Code)
			}
			seen[k] = row.Code
		}
	}
	for _, k := range []errs.Kind{errs.NotFound, errs.AlreadyExists, errs.NotADirectory, errs.NotAFile,
		errs.NotEmpty, errs.InvalidPath, errs.InvalidInput, errs.VaultNotFound, errs.VaultExists,
		errs.NoActiveVault, errs.VaultLocked, errs.VaultHasForks, errs.QuotaExceeded, errs.CorruptVault,
		errs.StorageError, errs.IoError, errs.CheckpointNotFound, errs.UnsupportedFormat, errs.NameTooLong,
		errs.TooManyLinks, errs.CrossDevice, errs.PermissionDenied, errs.StoreUnavailable, errs.Conflict} {
		if _, ok := seen[k]; !ok {
			t.Errorf("kind %s is in no row of the exit code table", k)
		}
	}
	if exitCode("SomethingNew") != 1 {
		t.Errorf("an unknown kind must exit 1")
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec  string
		old   uint32
		dir   bool
		want  uint32
		error bool
	}{
		{"755", 0, false, 0o755, false},
		{"0644", 0o777, false, 0o644, false},
		{"4755", 0, false, 0o4755, false},
		{"u+x", 0o644, false, 0o744, false},
		{"go-w", 0o777, false, 0o755, false},
		{"a=r", 0o777, false, 0o444, false},
		{"=rw", 0o7777, false, 0o666, false},
		{"+X", 0o644, false, 0o644, false},
		{"+X", 0o644, true, 0o755, false},
		{"+X", 0o744, false, 0o755, false},
		{"u=rwx,g=rx,o=", 0, false, 0o750, false},
		{"g=u", 0o700, false, 0o770, false},
		{"u+s,+t", 0o755, false, 0o5755, false},
		{"o+r-w", 0o666, false, 0o664, false},
		{"99", 0, false, 0, true},
		{"u", 0, false, 0, true},
		{"u+q", 0, false, 0, true},
		{"", 0, false, 0, true},
		{"12345", 0, false, 0, true},
	} {
		got, err := parseMode(c.spec, c.old, c.dir)
		if (err != nil) != c.error || (err == nil && got != c.want) {
			t.Errorf("parseMode(%q, %o, %v) = %o, %v; want %o, error %v", c.spec, c.old, c.dir, got, err, c.want, c.error)
		}
	}
}

func TestModeString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t    vfs.FileType
		mode uint32
		want string
	}{
		{vfs.TypeDir, 0o755, "drwxr-xr-x"},
		{vfs.TypeFile, 0o4755, "-rwsr-xr-x"},
		{vfs.TypeFile, 0o2644, "-rw-r-Sr--"},
		{vfs.TypeDir, 0o1777, "drwxrwxrwt"},
		{vfs.TypeSymlink, 0o777, "lrwxrwxrwx"},
	} {
		if got := modeString(c.t, c.mode); got != c.want {
			t.Errorf("modeString(%v, %o) = %s, want %s", c.t, c.mode, got, c.want)
		}
	}
}

// TestUTF8Checker feeds text split at every byte and checks the verdict
// matches utf8.Valid.
func TestUTF8Checker(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "héllo wörld", "日本語テキスト", "emoji 😀 end", "bad \xff byte",
		"cut \xe6\x97", "\xe6\x97\xa5", "\xed\xa0\x80 surrogate", "\xef\xbf\xbd replacement"} {
		for cut := 0; cut <= len(s); cut++ {
			for cut2 := cut; cut2 <= len(s); cut2++ {
				c := &utf8Checker{valid: true}
				c.Write([]byte(s[:cut]))
				c.Write([]byte(s[cut:cut2]))
				c.Write([]byte(s[cut2:]))
				if c.done() != utf8.ValidString(s) {
					t.Errorf("%q split at %d,%d: valid %v, want %v", s, cut, cut2, c.done(), utf8.ValidString(s))
				}
			}
		}
	}
}

func FuzzJSONStringWriter(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "line\nbreak\ttab\r", "\x00\x01\x1f\x7f", "日本 😀", "</script>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		var b bytes.Buffer
		b.WriteByte('"')
		for i := 0; i < len(s); i += 3 {
			jsonStringWriter{&b}.Write([]byte(s[i:min(i+3, len(s))]))
		}
		b.WriteByte('"')
		var got string
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || got != s {
			t.Errorf("%q encoded as %s: %q, %v", s, b.String(), got, err)
		}
	})
}

func TestPrescanJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"ls", "--json"}, true},
		{[]string{"--json=true", "nosuch"}, true},
		{[]string{"write", "/a", "--", "--json"}, false},
		{[]string{"ls"}, false},
	} {
		if got := prescanJSON(c.args); got != c.want {
			t.Errorf("prescanJSON(%q) = %v", c.args, got)
		}
	}
}
