package proxy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// execBuilt runs `avfs --json proxy exec ARGS...` with avfs built without
// the race detector (avfsBinary), for runs that make tens of thousands of
// FUSE requests: its mount serves them ten times faster than this test
// binary would. The envelope is checked against the schema.
func (e *env) execBuilt(args ...string) *proxy.Envelope {
	e.t.Helper()
	cmd := exec.Command(avfsBinary(e.t), append([]string{"--json", "proxy", "exec"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AVFS_HOME=" + e.home, "AVFS_PROXY_LINGER=0"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("proxy exec %v: %v\n%s%s", args, err, out.String(), errOut.String())
	}
	validate(e.t, out.String())
	var env proxy.Envelope
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		e.t.Fatalf("%v\n%s", err, out.String())
	}
	return &env
}

// A run that changes more than ChangesLimit paths lists the first
// ChangesLimit and says the list was cut; the summary counts every change
// by kind, with the bytes added and removed. --changes summary drops the
// list and keeps the summary; --changes none takes no diff at all.
func TestChangesModes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(0, "", "--shell", "printf 'hello\\n' > base.txt; printf 12345 > gone.txt; printf abc > old.txt")
	// FUSE: an overlay run reports a move as a delete and an add.
	many := e.execBuilt("--transport", "fuse", "--shell", "mkdir d && cd d && seq 1 10001 | xargs touch && cd .. && "+
		"printf 'hello world\\n' > base.txt && rm gone.txt && mv old.txt new.txt && head -c 1000 /dev/zero > big")
	r := many.Result
	want := proxy.Summary{Added: 10003, Modified: 1, Deleted: 1, Renamed: 1, BytesAdded: 1006, BytesRemoved: 5}
	if r.Summary == nil || *r.Summary != want {
		t.Errorf("summary %+v, want %+v", r.Summary, want)
	}
	if len(r.Changes) != proxy.ChangesLimit || !r.ChangesTruncated || r.ChangedFiles != 10006 || many.Request.Changes != "full" {
		t.Errorf("default: %d changes listed, truncated %v, changed_files %d, request %q", len(r.Changes), r.ChangesTruncated, r.ChangedFiles, many.Request.Changes)
	}
	code, out, _ := e.avfs("", "--json", "proxy", "show", many.ID)
	if code != 0 || strings.Count(out, `"path"`) != proxy.ChangesLimit || !strings.Contains(out, `"changes_truncated": true`) {
		t.Errorf("the record is not the envelope as printed: %d, %d paths", code, strings.Count(out, `"path"`))
	}

	sum := e.exec(0, "", "--changes", "summary", "--shell", "printf 12 > two; rm big")
	want = proxy.Summary{Added: 1, Deleted: 1, BytesAdded: 2, BytesRemoved: 1000}
	if r := sum.Result; len(r.Changes) != 0 || r.ChangesTruncated || r.ChangedFiles != 2 || r.Summary == nil || *r.Summary != want {
		t.Errorf("--changes summary: %+v changes, changed_files %d, summary %+v", r.Changes, r.ChangedFiles, r.Summary)
	}

	none := e.exec(0, "", "--changes", "none", "--shell", "printf 3 > three")
	if r := none.Result; len(r.Changes) != 0 || r.ChangedFiles != 0 || r.Summary != nil || r.Checkpoint == nil || !r.Checkpoint.Kept {
		t.Errorf("--changes none: %+v changes, changed_files %d, summary %+v", r.Changes, r.ChangedFiles, r.Summary)
	}
	// The run's states are still exact: its diff, and its undo.
	code, out, _ = e.avfs("", "--json", "diff", "run:"+none.ID, "run:"+none.ID+"^after")
	if code != 0 || !strings.Contains(out, `"path": "/three"`) || strings.Count(out, `"path"`) != 1 {
		t.Errorf("diff of a --changes none run: %d %s", code, out)
	}
	if code, out, _ := e.avfs("", "--json", "proxy", "undo"); code != 0 || !strings.Contains(out, none.ID) {
		t.Errorf("undo of a --changes none run: %d %s", code, out)
	}

	if code, out, _ := e.avfs("", "--json", "proxy", "exec", "--changes", "some", "--", "true"); code != 5 || !strings.Contains(out, "InvalidInput") {
		t.Errorf("--changes some: %d %s", code, out)
	}
}

// A record kept before --changes existed reads as a full list with its
// summary, so that it still follows proxy-exec.json.
func TestOldRecordGetsSummary(t *testing.T) {
	t.Parallel()
	s, err := proxy.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old := &proxy.Envelope{SchemaVersion: proxy.SchemaVersion, Kind: proxy.Kind, ID: "20260101T000000.000000000-00000000",
		Result: proxy.Result{Changes: []proxy.Change{
			{Path: "/a", Kind: "added", Type: "file", SizeAfter: 7},
			{Path: "/b", Kind: "modified", Type: "file", SizeBefore: 10, SizeAfter: 4},
		}}}
	if err := s.Put(old); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(old.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.Summary{Added: 1, Modified: 1, BytesAdded: 7, BytesRemoved: 6}
	if got.Request.Changes != proxy.ChangesFull || got.Result.Summary == nil || *got.Result.Summary != want {
		t.Errorf("old record read as %q, %+v", got.Request.Changes, got.Result.Summary)
	}
}
