package fusefs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// The stress test runs several worker processes at once in one mount.
// Each does random operations in its own subtree and in a shared
// directory, keeps a model of what its files must hold, checks files
// against the model as it goes, and hands the model back. The test then
// checks the whole tree against the models through the mount, and again
// through a new mount after an unmount, and runs fsck.
//
// A worker is the test binary itself, started with $AVFS_STRESS_WORKER
// holding its job (see init below): a separate process, as an agent's
// tools are. A worker's choices depend only on the seed and its id, so
// running one alone on a native directory (holding an empty "shared"),
// with ops set to the index of a failing op, rebuilds the model the
// failing run had: AVFS_STRESS_WORKER='{"mnt":DIR,"id":1,"seed":S,
// "ops":N,"out":FILE}' ./mount.test

const (
	stressWorkerEnv = "AVFS_STRESS_WORKER"
	stressSeedEnv   = "AVFS_STRESS_SEED" // reruns a failing seed
	stressShared    = "shared"
	stressLog       = "shared/log"    // every worker appends records
	stressWinner    = "shared/winner" // every worker renames files over it
	stressDirs      = 3               // shared/d0.. made and removed by all
	stressRecord    = 32              // bytes per record of the log
)

type stressJob struct {
	Mnt  string `json:"mnt"`
	ID   int    `json:"id"`
	Seed uint64 `json:"seed"`
	Ops  int    `json:"ops"`
	Out  string `json:"out"`
}

// stressEntry is what one path of a worker must be at the end.
type stressEntry struct {
	Path   string      `json:"path"`
	Kind   string      `json:"kind"` // file, dir, symlink
	Data   []byte      `json:"data,omitempty"`
	Mode   fs.FileMode `json:"mode,omitempty"`   // permission bits (file, dir)
	Target string      `json:"target,omitempty"` // symlink
	Inode  int         `json:"inode,omitempty"`  // file: names of one inode share it
	Links  int         `json:"links,omitempty"`  // file: names of the inode
}

type stressResult struct {
	Entries []stressEntry  `json:"entries"`
	Records int            `json:"records"` // appended to the log
	Winners int            `json:"winners"` // renamed over the winner
	Ops     map[string]int `json:"ops"`
}

func init() {
	if spec := os.Getenv(stressWorkerEnv); spec != "" {
		var job stressJob
		if err := json.Unmarshal([]byte(spec), &job); err != nil {
			fmt.Fprintln(os.Stderr, "bad job:", err)
			os.Exit(2)
		}
		syscall.Umask(0o022)
		w := newStressWorker(job)
		err := w.run()
		// The model is saved even after a failure, for the test to see
		// whether the vault holds what the mount showed wrong.
		if serr := w.save(); err == nil {
			err = serr
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "worker %d (seed %d): %v\nits operations:\n%s", job.ID, job.Seed, err, strings.Join(w.history, "\n"))
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// sfile is an inode of the model.
type sfile struct {
	id   int
	data []byte
	mode fs.FileMode
}

type stressWorker struct {
	job     stressJob
	r       *rand.Rand
	n       int               // names made so far
	files   map[string]*sfile // path → inode
	links   map[string]string // symlink path → target
	dirs    map[string]bool   // own directories (not the shared ones)
	inodes  int               // inodes made so far
	history []string          // every operation, for a failure report
	ops     map[string]int    // operations done, by kind
	records int               // appended to the log
	winners int               // renamed over the winner
}

func newStressWorker(job stressJob) *stressWorker {
	own := fmt.Sprintf("w%d", job.ID)
	return &stressWorker{job: job, r: rand.New(rand.NewPCG(job.Seed, uint64(job.ID))),
		files: map[string]*sfile{}, links: map[string]string{}, dirs: map[string]bool{own: true},
		ops: map[string]int{}}
}

func (w *stressWorker) abs(p string) string { return filepath.Join(w.job.Mnt, p) }

func (w *stressWorker) logf(format string, args ...any) {
	w.history = append(w.history, fmt.Sprintf(format, args...))
}

func (w *stressWorker) newName(prefix string) string {
	w.n++
	return fmt.Sprintf("%sw%d-%d", prefix, w.job.ID, w.n)
}

// pick returns a random key of m in a stable order, or "" if it is empty.
func pick[V any](r *rand.Rand, m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[r.IntN(len(keys))]
}

// size returns a random write size: mostly small, sometimes across
// chunks.
func (w *stressWorker) size() int {
	switch w.r.IntN(10) {
	case 0:
		return w.r.IntN(2*vfs.ChunkSize + 100)
	case 1, 2:
		return w.r.IntN(8192)
	default:
		return w.r.IntN(512)
	}
}

func (w *stressWorker) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(w.r.Uint32())
	}
	return b
}

// newFileDir is where a new name goes: an own directory, the shared
// directory or one of the shared subdirectories.
func (w *stressWorker) newFileDir() string {
	switch w.r.IntN(8) {
	case 0:
		return stressShared
	case 1:
		return fmt.Sprintf("%s/d%d", stressShared, w.r.IntN(stressDirs))
	}
	return pick(w.r, w.dirs)
}

// inSharedDir runs fn, which makes a name in dir; if a shared
// subdirectory is missing (another worker removed it), it makes it again
// and retries.
func (w *stressWorker) inSharedDir(dir string, fn func() error) error {
	for range 20 {
		err := fn()
		if !errors.Is(err, syscall.ENOENT) || !strings.HasPrefix(dir, stressShared+"/") {
			return err
		}
		if err := os.Mkdir(w.abs(dir), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return fmt.Errorf("%s keeps disappearing", dir)
}

func (w *stressWorker) run() error {
	type op struct {
		name   string
		weight int
		fn     func() error
	}
	ops := []op{
		{"create", 8, w.create},
		{"write", 12, w.writeAt},
		{"append", 6, w.append},
		{"truncate", 4, w.truncate},
		{"rename", 5, w.rename},
		{"renamedir", 1, w.renameDir},
		{"unlink", 4, w.unlink},
		{"mkdir", 3, w.mkdir},
		{"rmdir", 1, w.rmdir},
		{"link", 3, w.link},
		{"symlink", 3, w.symlink},
		{"chmod", 3, w.chmod},
		{"fsync", 1, w.fsync},
		{"check", 6, w.check},
		{"log", 4, w.appendLog},
		{"winner", 2, w.winner},
		{"shared-rmdir", 1, w.sharedRmdir},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	if err := os.Mkdir(w.abs(fmt.Sprintf("w%d", w.job.ID)), 0o755); err != nil {
		return err
	}
	for i := 0; i < w.job.Ops; i++ {
		k := w.r.IntN(total)
		for _, o := range ops {
			if k -= o.weight; k < 0 {
				w.ops[o.name]++
				if err := o.fn(); err != nil {
					return fmt.Errorf("op %d (%s): %w", i, o.name, err)
				}
				break
			}
		}
	}
	// Check every file at the end, from this process.
	for p := range w.files {
		if err := w.checkFile(p); err != nil {
			return err
		}
	}
	return nil
}

func (w *stressWorker) create() error {
	dir := w.newFileDir()
	p := path.Join(dir, w.newName("f"))
	data := w.bytes(w.size())
	w.logf("create %s (%d bytes)", p, len(data))
	err := w.inSharedDir(dir, func() error {
		f, err := os.OpenFile(w.abs(p), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return err
	}
	w.inodes++
	w.files[p] = &sfile{id: w.inodes, data: data, mode: 0o644}
	return nil
}

func (w *stressWorker) writeAt() error {
	p := pick(w.r, w.files)
	if p == "" {
		return w.create()
	}
	sf := w.files[p]
	off := w.r.IntN(len(sf.data) + vfs.ChunkSize)
	data := w.bytes(1 + w.size())
	w.logf("write %s at %d (%d bytes, size %d)", p, off, len(data), len(sf.data))
	f, err := os.OpenFile(w.abs(p), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, int64(off))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if end := off + len(data); end > len(sf.data) {
		sf.data = append(sf.data, make([]byte, end-len(sf.data))...)
	}
	copy(sf.data[off:], data)
	return nil
}

func (w *stressWorker) append() error {
	p := pick(w.r, w.files)
	if p == "" {
		return w.create()
	}
	sf := w.files[p]
	data := w.bytes(w.size())
	w.logf("append %s (%d bytes to %d)", p, len(data), len(sf.data))
	f, err := os.OpenFile(w.abs(p), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	sf.data = append(sf.data, data...)
	return nil
}

func (w *stressWorker) truncate() error {
	p := pick(w.r, w.files)
	if p == "" {
		return nil
	}
	sf := w.files[p]
	size := w.r.IntN(2*len(sf.data) + 1000)
	if w.r.IntN(2) == 0 {
		w.logf("truncate %s to %d (from %d)", p, size, len(sf.data))
		if err := os.Truncate(w.abs(p), int64(size)); err != nil {
			return err
		}
	} else { // O_TRUNC and rewrite
		size = w.size()
		data := w.bytes(size)
		w.logf("rewrite %s with O_TRUNC: %d bytes (from %d)", p, size, len(sf.data))
		if err := os.WriteFile(w.abs(p), data, 0o644); err != nil {
			return err
		}
		sf.data = data
		return nil
	}
	if size <= len(sf.data) {
		sf.data = sf.data[:size]
	} else {
		sf.data = append(sf.data, make([]byte, size-len(sf.data))...)
	}
	return nil
}

// rename renames a file or symlink to a new name or over another of its
// files or symlinks, possibly in another directory.
func (w *stressWorker) rename() error {
	var src string
	if w.r.IntN(4) == 0 {
		src = pick(w.r, w.links)
	}
	if src == "" {
		src = pick(w.r, w.files)
	}
	if src == "" {
		return nil
	}
	var dst string
	if w.r.IntN(3) == 0 { // over an existing name
		if w.r.IntN(2) == 0 {
			dst = pick(w.r, w.files)
		} else {
			dst = pick(w.r, w.links)
		}
	}
	if dst == "" {
		dst = path.Join(w.newFileDir(), w.newName("r"))
	}
	w.logf("rename %s → %s", src, dst)
	err := w.inSharedDir(path.Dir(dst), func() error { return os.Rename(w.abs(src), w.abs(dst)) })
	if err != nil {
		return err
	}
	if src == dst {
		return nil
	}
	if sf, ok := w.files[src]; ok {
		if w.files[dst] == sf { // two names of one inode: rename does nothing
			return nil
		}
		delete(w.files, src)
		delete(w.links, dst)
		w.files[dst] = sf
		return nil
	}
	t := w.links[src]
	delete(w.links, src)
	delete(w.files, dst)
	w.links[dst] = t
	return nil
}

// renameDir moves one of its directories (not its root) into another of
// its directories outside it.
func (w *stressWorker) renameDir() error {
	root := fmt.Sprintf("w%d", w.job.ID)
	src := pick(w.r, w.dirs)
	if src == root {
		return nil
	}
	parent := pick(w.r, w.dirs)
	if parent == src || strings.HasPrefix(parent, src+"/") {
		return nil
	}
	dst := path.Join(parent, w.newName("D"))
	w.logf("rename dir %s → %s", src, dst)
	if err := os.Rename(w.abs(src), w.abs(dst)); err != nil {
		return err
	}
	move := func(p string) (string, bool) {
		if p == src {
			return dst, true
		}
		if strings.HasPrefix(p, src+"/") {
			return dst + p[len(src):], true
		}
		return p, false
	}
	moveKeys(w.files, move)
	moveKeys(w.links, move)
	moveKeys(w.dirs, move)
	return nil
}

// moveKeys renames the keys of m that move renames.
func moveKeys[V any](m map[string]V, move func(string) (string, bool)) {
	moved := map[string]V{}
	for p, v := range m {
		if q, ok := move(p); ok {
			delete(m, p)
			moved[q] = v
		}
	}
	for q, v := range moved {
		m[q] = v
	}
}

func (w *stressWorker) unlink() error {
	var p string
	if w.r.IntN(4) == 0 {
		p = pick(w.r, w.links)
	}
	if p == "" {
		p = pick(w.r, w.files)
	}
	if p == "" {
		return nil
	}
	w.logf("unlink %s", p)
	if err := os.Remove(w.abs(p)); err != nil {
		return err
	}
	delete(w.files, p)
	delete(w.links, p)
	return nil
}

func (w *stressWorker) mkdir() error {
	p := path.Join(pick(w.r, w.dirs), w.newName("d"))
	w.logf("mkdir %s", p)
	if err := os.Mkdir(w.abs(p), 0o755); err != nil {
		return err
	}
	w.dirs[p] = true
	return nil
}

func (w *stressWorker) rmdir() error {
	root := fmt.Sprintf("w%d", w.job.ID)
	var empty []string
	for d := range w.dirs {
		if d == root {
			continue
		}
		used := hasUnder(w.files, d) || hasUnder(w.links, d) || hasUnder(w.dirs, d)
		if !used {
			empty = append(empty, d)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	slices.Sort(empty)
	d := empty[w.r.IntN(len(empty))]
	w.logf("rmdir %s", d)
	if err := os.Remove(w.abs(d)); err != nil {
		return err
	}
	delete(w.dirs, d)
	return nil
}

// hasUnder reports whether m has a key under directory d.
func hasUnder[V any](m map[string]V, d string) bool {
	for p := range m {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (w *stressWorker) link() error {
	src := pick(w.r, w.files)
	if src == "" {
		return nil
	}
	dir := w.newFileDir()
	dst := path.Join(dir, w.newName("h"))
	w.logf("link %s → %s", dst, src)
	if err := w.inSharedDir(dir, func() error { return os.Link(w.abs(src), w.abs(dst)) }); err != nil {
		return err
	}
	w.files[dst] = w.files[src]
	return nil
}

func (w *stressWorker) symlink() error {
	dir := w.newFileDir()
	p := path.Join(dir, w.newName("s"))
	target := pick(w.r, w.files)
	if target == "" || w.r.IntN(3) == 0 {
		target = "dangling/" + w.newName("x")
	} else {
		target = "../" + target
	}
	w.logf("symlink %s → %s", p, target)
	if err := w.inSharedDir(dir, func() error { return os.Symlink(target, w.abs(p)) }); err != nil {
		return err
	}
	w.links[p] = target
	return nil
}

func (w *stressWorker) chmod() error {
	p := pick(w.r, w.files)
	if p == "" {
		return nil
	}
	mode := []fs.FileMode{0o600, 0o640, 0o644, 0o755, 0o400, 0o700}[w.r.IntN(6)]
	w.logf("chmod %s %o", p, mode)
	if err := os.Chmod(w.abs(p), mode); err != nil {
		return err
	}
	w.files[p].mode = mode
	return nil
}

func (w *stressWorker) fsync() error {
	p := pick(w.r, w.files)
	if p == "" {
		return nil
	}
	w.logf("fsync %s", p)
	f, err := os.Open(w.abs(p))
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *stressWorker) check() error {
	p := pick(w.r, w.files)
	if p == "" {
		p = pick(w.r, w.links)
		if p == "" {
			return nil
		}
		got, err := os.Readlink(w.abs(p))
		if err != nil || got != w.links[p] {
			return fmt.Errorf("readlink %s: %q %v, want %q", p, got, err, w.links[p])
		}
		return nil
	}
	return w.checkFile(p)
}

func (w *stressWorker) checkFile(p string) error {
	sf := w.files[p]
	w.logf("check %s", p)
	got, err := os.ReadFile(w.abs(p))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, sf.data) {
		// Say whether it lasts.
		var size int64 = -1
		if st, err := os.Stat(w.abs(p)); err == nil {
			size = st.Size()
		}
		time.Sleep(200 * time.Millisecond)
		again, err := os.ReadFile(w.abs(p))
		return fmt.Errorf("%s reads %d bytes, want %d: %s%s (stat size then %d; 200ms later it reads %d bytes %v, %s)",
			p, len(got), len(sf.data), firstDiff(got, sf.data), whence(got, sf.data), size, len(again), err, firstDiff(again, sf.data))
	}
	st, err := os.Lstat(w.abs(p))
	if err != nil {
		return err
	}
	if st.Mode() != sf.mode {
		return fmt.Errorf("%s: mode %v, want %v", p, st.Mode(), sf.mode)
	}
	return nil
}

// whence says where the bytes read at the first difference were written,
// if they are elsewhere in what was written.
func whence(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i+16 > len(got) {
		return ""
	}
	if at := bytes.Index(want, got[i:i+16]); at >= 0 {
		return fmt.Sprintf(", and the bytes read there were written at offset %d", at)
	}
	return ""
}

// record is the n-th record of worker id in the log.
func record(seed uint64, id, n int) []byte {
	h := fnv.New64a()
	fmt.Fprint(h, seed, id, n)
	return fmt.Appendf(nil, "w%02d %08d %018d\n", id, n, h.Sum64()%1e18)
}

func (w *stressWorker) appendLog() error {
	rec := record(w.job.Seed, w.job.ID, w.records)
	w.logf("log record %d", w.records)
	f, err := os.OpenFile(w.abs(stressLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	n, err := f.Write(rec)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != len(rec) {
		err = fmt.Errorf("short append: %d bytes", n)
	}
	if err != nil {
		return err
	}
	w.records++
	return nil
}

// winnerData is what worker id's n-th file renamed over the winner holds.
func winnerData(seed uint64, id, n int) []byte {
	h := fnv.New64a()
	fmt.Fprint(h, seed, id, n, "winner")
	s := h.Sum64()
	return append(fmt.Appendf(nil, "w%02d %08d\n", id, n), randBytes(s, int(s%(2*vfs.ChunkSize)))...)
}

func (w *stressWorker) winner() error {
	tmp := path.Join(stressShared, w.newName(".tmp-"))
	data := winnerData(w.job.Seed, w.job.ID, w.winners)
	w.logf("winner %d via %s", w.winners, tmp)
	if err := os.WriteFile(w.abs(tmp), data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(w.abs(tmp), w.abs(stressWinner)); err != nil {
		return err
	}
	w.winners++
	return nil
}

// sharedRmdir tries to remove a shared subdirectory: it fails while any
// worker has a name in it.
func (w *stressWorker) sharedRmdir() error {
	d := fmt.Sprintf("%s/d%d", stressShared, w.r.IntN(stressDirs))
	w.logf("rmdir %s", d)
	err := os.Remove(w.abs(d))
	if err == nil || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EEXIST) {
		return nil
	}
	return err
}

func (w *stressWorker) save() error {
	res := stressResult{Records: w.records, Winners: w.winners, Ops: w.ops}
	links := map[*sfile]int{}
	for _, sf := range w.files {
		links[sf]++
	}
	for p, sf := range w.files {
		res.Entries = append(res.Entries, stressEntry{Path: p, Kind: "file", Data: sf.data, Mode: sf.mode, Inode: w.job.ID*1_000_000 + sf.id, Links: links[sf]})
	}
	for p, t := range w.links {
		res.Entries = append(res.Entries, stressEntry{Path: p, Kind: "symlink", Target: t})
	}
	for p := range w.dirs {
		res.Entries = append(res.Entries, stressEntry{Path: p, Kind: "dir", Mode: 0o755})
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(w.job.Out, b, 0o644)
}

// TestStress runs the workers in a mount, then checks the tree through
// the mount, and through a new mount after an unmount.
func TestStress(t *testing.T) {
	const workers, ops = 4, 250
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(stressSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (rerun with %s=%d)", seed, stressSeedEnv, seed)
	f := mountVault(t, "sqlite", false)
	if err := os.Mkdir(filepath.Join(f.Mnt, stressShared), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(f.Mnt, stressShared), 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_TEST_AS_CLI=") && !strings.HasPrefix(kv, stressWorkerEnv+"=") {
			env = append(env, kv)
		}
	}
	out := t.TempDir()
	type proc struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	procs := make([]*proc, workers)
	start := time.Now()
	for i := range procs {
		job, _ := json.Marshal(stressJob{Mnt: f.Mnt, ID: i, Seed: seed, Ops: ops, Out: filepath.Join(out, strconv.Itoa(i))})
		p := &proc{cmd: exec.CommandContext(ctx, os.Args[0])}
		p.cmd.Env = append(env, stressWorkerEnv+"="+string(job))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			cancel()
			for _, p := range procs[:i] {
				_ = p.cmd.Wait()
			}
			t.Fatal(err)
		}
		procs[i] = p
	}
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v\n%s", i, err, p.out.String())
		}
	}
	t.Logf("%d workers × %d operations: %v", workers, ops, time.Since(start))
	results := make([]stressResult, workers)
	for i := range results {
		b, err := os.ReadFile(filepath.Join(out, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &results[i]); err != nil {
			t.Fatal(err)
		}
		t.Logf("worker %d: %d paths, operations %v", i, len(results[i].Entries), results[i].Ops)
	}

	checkStress(t, "through the mount", f.Mnt, seed, results)
	unmountEventually(t, f.S)
	g := mountOn(t, f.Home, f.Name, t.TempDir(), true)
	checkStress(t, "after a remount", g.Mnt, seed, results)
	unmountEventually(t, g.S)
	fsck(t, f.Home, f.Name)
}

// checkStress checks the tree under mnt against the workers' models:
// every path a worker left is there as the worker left it, and nothing
// else is there.
func checkStress(t *testing.T, when, mnt string, seed uint64, results []stressResult) {
	t.Helper()
	want := map[string]stressEntry{stressShared: {Kind: "dir", Mode: 0o755}}
	for _, r := range results {
		for _, e := range r.Entries {
			want[e.Path] = e
		}
	}
	inodes := map[int]os.FileInfo{} // inode of a model → the first name's stat
	problems := 0
	bad := func(format string, args ...any) {
		t.Helper()
		problems++
		if problems <= 20 {
			t.Errorf(when+": "+format, args...)
		}
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(mnt, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p, _ := filepath.Rel(mnt, abs)
		if p == "." {
			return nil
		}
		seen[p] = true
		st, err := os.Lstat(abs)
		if err != nil {
			return err
		}
		switch {
		case p == stressLog:
			checkLog(t, when, abs, seed, results)
			return nil
		case p == stressWinner:
			checkWinner(t, when, abs, seed, results)
			return nil
		case strings.HasPrefix(p, stressShared+"/d") && !strings.Contains(p[len(stressShared)+1:], "/"):
			if !st.IsDir() { // a shared subdirectory: there or not
				bad("%s is %v, want a directory", p, st.Mode())
			}
			return nil
		}
		e, ok := want[p]
		if !ok {
			bad("%s (%v) is not expected", p, st.Mode())
			if st.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch e.Kind {
		case "dir":
			if !st.IsDir() || st.Mode().Perm() != e.Mode {
				bad("%s: %v, want a directory %v", p, st.Mode(), e.Mode)
			}
		case "symlink":
			target, err := os.Readlink(abs)
			if st.Mode().Type() != fs.ModeSymlink || err != nil || target != e.Target {
				bad("%s: %v → %q %v, want a symlink to %q", p, st.Mode(), target, err, e.Target)
			}
		case "file":
			if !st.Mode().IsRegular() || st.Mode().Perm() != e.Mode {
				bad("%s: %v, want a file %v", p, st.Mode(), e.Mode)
			}
			if n := st.Sys().(*syscall.Stat_t).Nlink; int(n) != e.Links {
				bad("%s: %d links, want %d", p, n, e.Links)
			}
			if st.Size() != int64(len(e.Data)) {
				bad("%s: size %d, want %d", p, st.Size(), len(e.Data))
			}
			got, err := os.ReadFile(abs)
			if err != nil || !bytes.Equal(got, e.Data) {
				bad("%s: reads %d bytes %v, want %d: %s", p, len(got), err, len(e.Data), firstDiff(got, e.Data))
			}
			if first, ok := inodes[e.Inode]; !ok {
				inodes[e.Inode] = st
			} else if !os.SameFile(first, st) {
				bad("%s: another inode than the other names of its file", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: walk: %v", when, err)
	}
	for p := range want {
		if !seen[p] {
			bad("%s (%s) is missing", p, want[p].Kind)
		}
	}
	if problems > 20 {
		t.Errorf("%s: %d problems in all", when, problems)
	}
}

// checkLog checks the log every worker appended to: whole records, each
// worker's in order and all there.
func checkLog(t *testing.T, when, abs string, seed uint64, results []stressResult) {
	t.Helper()
	data, err := os.ReadFile(abs)
	if err != nil {
		t.Errorf("%s: log: %v", when, err)
		return
	}
	total := 0
	for _, r := range results {
		total += r.Records
	}
	if len(data) != total*stressRecord {
		t.Errorf("%s: log holds %d bytes, want %d records of %d", when, len(data), total, stressRecord)
		return
	}
	next := make([]int, len(results))
	for off := 0; off < len(data); off += stressRecord {
		rec := data[off : off+stressRecord]
		id, err := strconv.Atoi(string(rec[1:3]))
		if err != nil || id >= len(results) || !bytes.Equal(rec, record(seed, id, next[id])) {
			t.Errorf("%s: log record at %d is %q, not the next record of a worker", when, off, rec)
			return
		}
		next[id]++
	}
}

// checkWinner checks that the file every worker renamed over is whole.
func checkWinner(t *testing.T, when, abs string, seed uint64, results []stressResult) {
	t.Helper()
	data, err := os.ReadFile(abs)
	if err != nil {
		t.Errorf("%s: winner: %v", when, err)
		return
	}
	var id, n int
	var err1, err2 error = errors.New("short"), nil
	if len(data) >= 13 {
		id, err1 = strconv.Atoi(string(data[1:3]))
		n, err2 = strconv.Atoi(string(data[4:12]))
	}
	if err1 != nil || err2 != nil || id >= len(results) || n >= results[id].Winners || !bytes.Equal(data, winnerData(seed, id, n)) {
		t.Errorf("%s: the winner (%d bytes, %q…) is not a file a worker renamed over it", when, len(data), data[:min(len(data), 13)])
	}
}

// TestStatWhilePersisting appends to a file and fstats it after each
// append while another descriptor fsyncs it over and over, so that the
// write-back cache persists the file while the stat is answered: the size
// must never go back, and every append must land at the end. (Distilled
// from TestStress, where an idle persist racing a lookup or a stat made
// a file read short.)
func TestStatWhilePersisting(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) { statWhilePersisting(t, engine) })
	}
}

func statWhilePersisting(t *testing.T, engine string) {
	f := mountVault(t, engine, false)
	p := filepath.Join(f.Mnt, "log")
	fd, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	syncer, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer syncer.Close()
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := syncer.Sync(); err != nil {
				done <- err
				return
			}
		}
	}()
	var want []byte
	stale := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		rec := fmt.Appendf(nil, "record %08d\n", len(want)/16)
		if _, err := fd.Write(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
		st, err := fd.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != int64(len(want)) {
			if stale++; stale <= 3 {
				t.Errorf("after appending %d bytes fstat says %d", len(want), st.Size())
			}
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("fsync: %v", err)
	}
	if stale > 3 {
		t.Errorf("%d of %d sizes were stale", stale, len(want)/16)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the file reads %d bytes %v, want the %d appended: %s", len(got), err, len(want), firstDiff(got, want))
	}
}
