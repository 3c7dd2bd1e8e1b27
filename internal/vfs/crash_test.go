package vfs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentvfs/agentvfs/internal/kv/postgres"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The crash test kills a process that is changing a vault (SIGKILL, at a
// random moment) and requires the reopened vault to pass fsck and to hold
// exactly what the process reported committed. The child announces each
// operation before it starts ("? w 7 7") and reports it after its call
// returned ("w 7 7"); only the last announced operation can be in doubt,
// and the vault must then be in the state either before or after it.
//
// On PostgreSQL the kill does not decide that operation: the server
// carries out a COMMIT the child sent before it died, perhaps well after
// the kill. The parent checks the vault only once the child's sessions
// have ended (pgtest.WaitGone). The slow-commit case makes every COMMIT
// last 30 ms on the server, so that most kills land inside one.

const (
	crashEnvHome = "AVFS_TEST_CRASH_HOME"
	crashEnvSeed = "AVFS_TEST_CRASH_SEED"
	crashEnvNext = "AVFS_TEST_CRASH_NEXT"
	crashPrefix  = "avfs-crash "
	// crashEnvDSN names a PostgreSQL store instead of a home: the child
	// connects to the parent's server, it never starts one.
	crashEnvDSN = "AVFS_TEST_CRASH_DSN"
)

// crashVault opens the crash test's vault: in the home at dir, or when dsn
// is set, the one engine of that PostgreSQL store.
func crashVault(dir, dsn string) (*vfs.Vault, error) {
	if dsn == "" {
		home, err := registry.Open(dir)
		if err != nil {
			return nil, err
		}
		return home.Open("v")
	}
	eng, err := postgres.Open(dsn, nil)
	if err != nil {
		return nil, err
	}
	v, err := vfs.Open(eng, nil)
	if err != nil {
		eng.Close()
	}
	return v, err
}

func TestCrash(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 4
	}
	for _, engine := range []string{"sqlite", "bolt", "postgres", "postgres-slow-commit"} {
		t.Run(engine, func(t *testing.T) {
			dir, dsn := t.TempDir(), ""
			var v *vfs.Vault
			if strings.HasPrefix(engine, "postgres") {
				dsn = pgtest.DSN(t)
				eng, err := postgres.Create(dsn, nil)
				if err != nil {
					t.Fatal(err)
				}
				if v, err = vfs.Create(eng, "v", vfs.Quota{}); err != nil {
					t.Fatal(err)
				}
				if engine == "postgres-slow-commit" {
					slowCommits(t, dsn, 30*time.Millisecond)
				}
			} else {
				home, err := registry.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				if v, err = home.Create("v", registry.CreateOptions{Engine: engine}); err != nil {
					t.Fatal(err)
				}
			}
			v.Close()
			st := &crashState{files: map[int]int{}, cps: map[string]map[int]int{}, next: 1}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
			for round := range rounds {
				seed := rng.Int64()
				delay := time.Duration(5+rng.IntN(296)) * time.Millisecond
				lines := runCrashChild(t, dir, dsn, seed, st.next, delay)
				pending := st.replay(t, lines)
				t.Logf("round %d: seed %d, killed after %v, %d lines, in doubt: %q",
					round, seed, delay, len(lines), pending)
				t.Logf("round %d: %s", round, st.verify(t, dir, dsn, pending))
			}
		})
	}
}

// slowCommits makes each write transaction on the store at dsn wait d on
// the server at its COMMIT (a deferred trigger, once per transaction).
func slowCommits(t *testing.T, dsn string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION avfs_crash_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('avfs_crash.slept', true) IS DISTINCT FROM 'y' THEN
		PERFORM set_config('avfs_crash.slept', 'y', true);
		PERFORM pg_sleep(%g);
	END IF;
	RETURN NULL;
END$$;
CREATE CONSTRAINT TRIGGER avfs_crash_slow AFTER INSERT OR UPDATE OR DELETE ON %s
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION avfs_crash_slow()`, d.Seconds(), postgres.PairsTable))
	if err != nil {
		t.Fatal(err)
	}
}

// runCrashChild runs one child on the home's vault, kills it delay after it
// is ready, and returns the protocol lines it wrote once nothing the child
// started can still change the vault: on PostgreSQL, when its sessions
// have ended on the server.
func runCrashChild(t *testing.T, home, dsn string, seed int64, next int, delay time.Duration) []string {
	t.Helper()
	session, childDSN := fmt.Sprint("avfs-crash-", seed), ""
	if dsn != "" {
		childDSN = pgtest.Tag(dsn, session)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvHome+"="+home, crashEnvDSN+"="+childDSN,
		crashEnvSeed+"="+strconv.FormatInt(seed, 10), crashEnvNext+"="+strconv.Itoa(next))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	reap := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(reap)
	ready, eof := make(chan struct{}), make(chan struct{})
	var lines []string
	go func() {
		defer close(eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), crashPrefix)
			switch {
			case !ok:
			case line == "ready":
				close(ready)
			default:
				lines = append(lines, line)
			}
		}
	}()
	select {
	case <-ready:
		time.Sleep(delay)
	case <-eof: // the child died before it was ready
	case <-time.After(60 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-eof
	reap()
	select {
	case <-ready:
	default:
		t.Fatalf("child never got ready (%v); stderr:\n%s", cmd.ProcessState, stderr.String())
	}
	if cmd.ProcessState.Exited() {
		t.Fatalf("child exited by itself (%v); stderr:\n%s", cmd.ProcessState, stderr.String())
	}
	if dsn != "" {
		if err := pgtest.WaitGone(dsn, session, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

// crashState is what the parent knows the vault holds: file number to
// content number, in the working state and in each checkpoint.
type crashState struct {
	files map[int]int
	cps   map[string]map[int]int
	next  int            // the next unused number
	cache map[int][]byte // crashContent, memoized
}

func (st *crashState) content(i int) []byte {
	if st.cache == nil {
		st.cache = map[int][]byte{}
	}
	b, ok := st.cache[i]
	if !ok {
		b = crashContent(i)
		st.cache[i] = b
	}
	return b
}

// crashContent is the content written as number i: mostly small, every
// eighth one more than two chunks.
func crashContent(i int) []byte {
	n := 1 + i*37%700
	if i%8 == 0 {
		n = 2*vfs.ChunkSize + 1000 + i%5000
	}
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*131 + j*7 + j/251)
	}
	return b
}

// see moves next past the numbers an operation uses (files, contents, and
// checkpoints "k<n>"), committed or not.
func (st *crashState) see(op []string) {
	for _, f := range op[1:] {
		if n, err := strconv.Atoi(strings.TrimPrefix(f, "k")); err == nil {
			st.next = max(st.next, n+1)
		}
	}
}

// apply changes the state by one committed operation.
func (st *crashState) apply(op []string) error {
	st.see(op)
	num := func(i int) int {
		n, _ := strconv.Atoi(op[i])
		return n
	}
	switch op[0] {
	case "w": // file content
		st.files[num(1)] = num(2)
	case "m": // file file content, in one transaction
		c := num(3)
		st.files[num(1)], st.files[num(2)] = c, c
	case "u": // file
		delete(st.files, num(1))
	case "s":
		st.cps[op[1]] = maps.Clone(st.files)
	case "r":
		cp, ok := st.cps[op[1]]
		if !ok {
			return fmt.Errorf("restore of unknown checkpoint %q", op[1])
		}
		st.files = maps.Clone(cp)
	case "x":
		delete(st.cps, op[1])
	case "c", "g":
	default:
		return fmt.Errorf("unknown operation %q", op)
	}
	return nil
}

func (st *crashState) clone() *crashState {
	c := &crashState{files: maps.Clone(st.files), cps: map[string]map[int]int{}, next: st.next, cache: st.cache}
	for name, cp := range st.cps {
		c.cps[name] = maps.Clone(cp)
	}
	return c
}

// replay applies the committed operations of a child's output and returns
// the operation left in doubt, if any.
func (st *crashState) replay(t *testing.T, lines []string) []string {
	t.Helper()
	var pending []string
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			t.Fatalf("empty protocol line")
		}
		if f[0] == "?" {
			if pending != nil {
				t.Fatalf("operation %q announced before %q was committed", f[1:], pending)
			}
			pending = f[1:]
			continue
		}
		if !slices.Equal(f, pending) {
			t.Fatalf("committed %q, announced %q", f, pending)
		}
		if err := st.apply(f); err != nil {
			t.Fatal(err)
		}
		pending = nil
	}
	if pending != nil {
		st.see(pending)
	}
	return pending
}

// crashSnapshot is what a vault holds: file name to content, in the working
// state ("") and in each checkpoint.
type crashSnapshot map[string]map[string][]byte

func readSnapshot(v *vfs.Vault) (crashSnapshot, error) {
	snap := crashSnapshot{}
	read := func(tx *vfs.Tx) (map[string][]byte, error) {
		entries, err := tx.ReadDir(vfs.RootIno)
		if err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		for _, e := range entries {
			if files[e.Name], err = tx.ReadFile("/" + e.Name); err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	err := v.View(func(tx *vfs.Tx) (err error) {
		snap[""], err = read(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	cps, err := v.Checkpoints()
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		err := v.ViewAt(cp.Name, func(tx *vfs.Tx) (err error) {
			snap[cp.Name], err = read(tx)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// matches explains how a snapshot differs from the state; "" if it does not.
func (st *crashState) matches(snap crashSnapshot) string {
	states := map[string]map[int]int{"": st.files}
	for name, cp := range st.cps {
		states[name] = cp
	}
	if got, want := slices.Sorted(maps.Keys(snap)), slices.Sorted(maps.Keys(states)); !slices.Equal(got, want) {
		return fmt.Sprintf("checkpoints %q, want %q", got[1:], want[1:])
	}
	for name, files := range states {
		got := snap[name]
		for f, c := range files {
			data, ok := got[fmt.Sprint("f", f)]
			if !ok {
				return fmt.Sprintf("state %q lacks committed file f%d", name, f)
			}
			if !bytes.Equal(data, st.content(c)) {
				return fmt.Sprintf("state %q: f%d is not content %d (%d bytes)", name, f, c, len(data))
			}
		}
		if len(got) != len(files) {
			return fmt.Sprintf("state %q holds %d files, want %d", name, len(got), len(files))
		}
	}
	return ""
}

// verify reopens the vault, runs fsck, and checks that it holds the
// committed state, or the state after the operation in doubt, which then
// becomes the known state. It says which it was.
func (st *crashState) verify(t *testing.T, dir, dsn string, pending []string) string {
	t.Helper()
	v, err := crashVault(dir, dsn)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer v.Close()
	checkFsck(t, v)
	if t.Failed() {
		t.FailNow()
	}
	snap, err := readSnapshot(v)
	if err != nil {
		t.Fatalf("reading the vault after kill: %v", err)
	}
	before := st.matches(snap)
	switch {
	case before == "" && pending == nil:
		return "vault as committed"
	case before == "":
		return "vault as before it"
	}
	if pending != nil {
		after := st.clone()
		if err := after.apply(pending); err != nil {
			t.Fatal(err)
		}
		if after.matches(snap) == "" {
			*st = *after
			return "vault as after it"
		}
	}
	t.Fatalf("the vault after kill does not hold what was committed: %s (in doubt: %q)", before, pending)
	return ""
}

// TestCrashChild is the process TestCrash kills: it changes the vault in a
// loop until killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvHome)
	if dir == "" {
		t.Skip("helper process of TestCrash")
	}
	seed, _ := strconv.ParseInt(os.Getenv(crashEnvSeed), 10, 64)
	next, _ := strconv.Atoi(os.Getenv(crashEnvNext))
	if err := crashChild(dir, os.Getenv(crashEnvDSN), seed, next); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
}

func crashChild(dir, dsn string, seed int64, next int) error {
	v, err := crashVault(dir, dsn)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	say := func(format string, args ...any) {
		// One write(2) per line: once it returns, the line survives SIGKILL.
		os.Stdout.WriteString(crashPrefix + fmt.Sprintf(format, args...) + "\n")
	}
	var files []int
	listFiles := func() error {
		files = files[:0]
		return v.View(func(tx *vfs.Tx) error {
			entries, err := tx.ReadDir(vfs.RootIno)
			for _, e := range entries {
				n, _ := strconv.Atoi(strings.TrimPrefix(e.Name, "f"))
				files = append(files, n)
			}
			return err
		})
	}
	if err := listFiles(); err != nil {
		return err
	}
	cps, err := v.Checkpoints()
	if err != nil {
		return err
	}
	var names []string
	for _, cp := range cps {
		names = append(names, cp.Name)
	}
	write := func(content int, fs ...int) error {
		return v.Update(func(tx *vfs.Tx) error {
			for _, f := range fs {
				if _, err := tx.WriteFile(fmt.Sprint("/f", f), crashContent(content), 0o644); err != nil {
					return err
				}
			}
			return nil
		})
	}
	say("ready")
	for i := next; ; i++ {
		var op string
		var do func() error
		p := rng.IntN(100)
		switch {
		case p < 45 || len(files) < 2:
			op, do = fmt.Sprintf("w %d %d", i, i), func() error { return write(i, i) }
			files = append(files, i)
		case p < 55:
			f := files[rng.IntN(len(files))]
			op, do = fmt.Sprintf("w %d %d", f, i), func() error { return write(i, f) }
		case p < 62:
			f := files[rng.IntN(len(files))]
			op, do = fmt.Sprintf("m %d %d %d", f, i, i), func() error { return write(i, f, i) }
			files = append(files, i)
		case p < 66 || len(files) > 30:
			k := rng.IntN(len(files))
			f := files[k]
			files = slices.Delete(files, k, k+1)
			op, do = fmt.Sprintf("u %d", f), func() error {
				return v.Update(func(tx *vfs.Tx) error { return tx.Unlink(vfs.RootIno, fmt.Sprint("f", f)) })
			}
		case p < 74 && len(names) < 6:
			name := fmt.Sprint("k", i)
			names = append(names, name)
			op, do = "s "+name, func() error { _, err := v.SaveCheckpoint(name, ""); return err }
		case p < 80 && len(names) > 0:
			name := names[rng.IntN(len(names))]
			op, do = "r "+name, func() error {
				if err := v.RestoreCheckpoint(name); err != nil {
					return err
				}
				return listFiles()
			}
		case p < 86 && len(names) > 0:
			k := rng.IntN(len(names))
			name := names[k]
			names = slices.Delete(names, k, k+1)
			op, do = "x "+name, func() error { return v.DeleteCheckpoint(name) }
		case p < 93:
			op, do = "c", func() error { _, err := v.Compact(); return err }
		default:
			op, do = "g", func() error { _, err := v.GC(); return err }
		}
		say("? %s", op)
		if err := do(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		say("%s", op)
	}
}
