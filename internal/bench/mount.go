package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Mount measures work inside a mount against the same work on the native
// disk, in the same run, with real processes (cat, grep, git) against a
// mount served by its own avfs process (see avfsBinary). It prints
// each as a ratio; the targets are the brief's.
func Mount(cfg Config) (err error) {
	bin, err := avfsBinary()
	if err != nil {
		return err
	}
	reps := max(cfg.Reps, 1)
	work, err := os.MkdirTemp(cfg.Dir, "mountbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	home := filepath.Join(work, "home")
	native := filepath.Join(work, "native")
	mnt := filepath.Join(work, "mnt")
	loopData := filepath.Join(work, "loopdata")
	loop := filepath.Join(work, "loop")
	for _, d := range []string{native, mnt, loopData, loop} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	env := append(os.Environ(), "AVFS_HOME="+home)
	avfs := func(args ...string) ([]byte, error) {
		c := exec.Command(bin, args...)
		c.Env = env
		out, err := c.Output()
		if err != nil {
			return out, fmt.Errorf("avfs %s: %w", strings.Join(args, " "), err)
		}
		return out, nil
	}
	if _, err := avfs("vault", "create", "bench"); err != nil {
		return err
	}
	out, err := avfs("mount", "bench", mnt, "--json")
	if err != nil {
		return err
	}
	var m struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return fmt.Errorf("avfs mount printed %q: %w", out, err)
	}
	defer func() { _, _ = avfs("unmount", mnt) }()
	stopLoop, err := startLoopback(loopData, loop)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stopLoop(); err == nil {
			err = serr
		}
	}()
	// A failing workload shows what the mount's server logged.
	defer func() {
		if err != nil {
			if logs, _ := filepath.Glob(filepath.Join(home, "mounts", "*.log")); len(logs) > 0 {
				if b, rerr := os.ReadFile(logs[0]); rerr == nil && len(b) > 0 {
					err = fmt.Errorf("%w\nmount server log:\n%s", err, b)
				}
			}
		}
	}()

	w := cfg.Out
	fmt.Fprintf(w, "mount vs native disk (median of %d, same run; loopback: the same work through go-fuse's\n"+
		"  pass-through file system on the native disk, what FUSE alone costs here)\n", reps)
	// ratioN runs fn n times on each side, rotating which goes first,
	// so that a slow minute of the machine weighs on every median alike,
	// and settles the disks before each run, so that no side pays for
	// another's deferred writes.
	ratioN := func(name, target string, n int, fn func(root string) error) error {
		var ds [3][]time.Duration
		roots := [3]string{native, mnt, loop}
		for r := range n {
			for k := range 3 {
				i := (r + k) % 3
				if err := settle(mnt); err != nil {
					return err
				}
				start := time.Now()
				if err := fn(roots[i]); err != nil {
					return fmt.Errorf("%s in %s: %w", name, roots[i], err)
				}
				ds[i] = append(ds[i], time.Since(start))
			}
		}
		var d [3]time.Duration
		for i := range ds {
			slices.Sort(ds[i])
			d[i] = ds[i][len(ds[i])/2]
		}
		fmt.Fprintf(w, "  %-34s native %10s  mount %10s  %5.2f× (target %s)  loopback %5.2f×\n",
			name, ms(d[0]), ms(d[1]), float64(d[1])/float64(d[0]), target, float64(d[2])/float64(d[0]))
		return nil
	}
	ratio := func(name, target string, fn func(root string) error) error {
		return ratioN(name, target, reps, fn)
	}

	// Read a source tree: 5,000 files of 4 KiB in 50 directories, warm.
	for _, root := range []string{native, mnt, loop} {
		if err := makeTree(filepath.Join(root, "src"), 50, 100, 4096); err != nil {
			return err
		}
		if err := sh(root, "find src -type f -exec cat {} + >/dev/null"); err != nil {
			return err
		}
	}
	if err := ratio("read tree (cat all + grep -r)", "≤1.3×", func(root string) error {
		return sh(root, "find src -type f -exec cat {} + >/dev/null; grep -rq no-such-text src || true")
	}); err != nil {
		return err
	}

	// A mixed git workload on a 2,000-file repository.
	for _, root := range []string{native, mnt, loop} {
		repo := filepath.Join(root, "repo")
		if err := makeTree(repo, 40, 50, 2048); err != nil {
			return err
		}
		if err := sh(repo, "git init -q -b main && git add -A && git -c user.email=b@b -c user.name=b commit -qm base && git branch other"); err != nil {
			return err
		}
	}
	round := 0
	if err := ratio("git status/add/commit/checkout", "≤2×", func(root string) error {
		round++
		return sh(filepath.Join(root, "repo"), fmt.Sprintf(`set -e
for i in $(seq 1 50); do echo %d >> d$((i %% 40))/f$i; done
git status --porcelain >/dev/null
git add -A && git -c user.email=b@b -c user.name=b commit -qm r%d
git checkout -q other && git status --porcelain >/dev/null && git checkout -q main`, round, round))
	}); err != nil {
		return err
	}

	// Edit 1 MiB in the middle of a 50 MiB file, then fsync: new data
	// each time (the vault stores equal content once, so rewriting the
	// same bytes would measure less than an edit), with the file settled
	// on disk first, and more rounds than the rest, as one edit is short.
	const edits = 15
	patches := make([][]byte, edits)
	for i := range patches {
		patches[i] = randomBytes(uint64(100+i), 1<<20)
	}
	for _, root := range []string{native, mnt, loop} {
		if err := os.WriteFile(filepath.Join(root, "big"), randomBytes(8, 50<<20), 0o644); err != nil {
			return err
		}
		if err := sh(root, "sync"); err != nil {
			return err
		}
	}
	editRound := map[string]int{}
	if err := ratioN("edit 1 MiB of 50 MiB + fsync", "≤1.5×", edits, func(root string) error {
		patch := patches[editRound[root]%edits]
		editRound[root]++
		f, err := os.OpenFile(filepath.Join(root, "big"), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteAt(patch, 25<<20); err != nil {
			return err
		}
		return f.Sync()
	}); err != nil {
		return err
	}

	// Create 10,000 small files in 100 directories.
	gen := 0
	if err := ratio("create 10,000 files in 100 dirs", "≤3×", func(root string) error {
		gen++
		return makeTree(filepath.Join(root, fmt.Sprintf("many%d", gen)), 100, 100, 100)
	}); err != nil {
		return err
	}

	// Sequential write and read of 2 GiB.
	const total = 2 << 30
	block := randomBytes(9, 1<<20)
	var mbps [2][2]float64
	for i, root := range []string{native, mnt} {
		p := filepath.Join(root, "seq")
		start := time.Now()
		if err := writeSeq(p, block, total); err != nil {
			return err
		}
		mbps[i][0] = total / 1e6 / time.Since(start).Seconds()
		if err := sh(root, "sync"); err != nil {
			return err
		}
		start = time.Now()
		if err := sh(root, "cat seq >/dev/null"); err != nil {
			return err
		}
		mbps[i][1] = total / 1e6 / time.Since(start).Seconds()
		_ = os.Remove(p)
	}
	fmt.Fprintf(w, "  %-34s native %6.0f MB/s  mount %6.0f MB/s\n", "sequential write 2 GiB + fsync", mbps[0][0], mbps[1][0])
	fmt.Fprintf(w, "  %-34s native %6.0f MB/s  mount %6.0f MB/s\n", "sequential read 2 GiB", mbps[0][1], mbps[1][1])
	fmt.Fprintf(w, "  %-34s %s (target < 200 MiB)\n", "mount peak RSS (VmHWM)", peakRSS(m.PID))
	return nil
}

// settle lets the disks go quiet: the mount persists what it buffered
// (fsync of a directory of it persists every file) and the host writes
// back its dirty pages; then the mount's background log checkpoint, which
// starts once its writer has rested 200 ms, gets time to finish (with
// 300 ms it still ran into the next run, which cost the git workload
// about a tenth).
func settle(mnt string) error {
	d, err := os.Open(mnt)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return err
	}
	syscall.Sync()
	time.Sleep(time.Second)
	return nil
}

// sh runs a shell command in dir.
func sh(dir, script string) error {
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", script, err, stderr.String())
	}
	return nil
}

// makeTree writes dirs×files files of size bytes each, with distinct text.
func makeTree(root string, dirs, files, size int) error {
	line := []byte("the quick brown fox jumps over the lazy dog 0123456789\n")
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for f := range files {
			b := bytes.Repeat(line, size/len(line)+1)[:size]
			copy(b, fmt.Sprintf("%d/%d ", d, f))
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", f)), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return b
}

// writeSeq writes total bytes of block, stamped per 64 KiB so that no two
// chunks are equal, then fsyncs.
func writeSeq(path string, block []byte, total int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for off := int64(0); off < total; off += int64(len(block)) {
		for i := 0; i < len(block); i += 64 << 10 {
			copy(block[i:], fmt.Sprintf("%016x", off+int64(i)))
		}
		if _, err := f.Write(block); err != nil {
			return err
		}
	}
	return f.Sync()
}

// peakRSS is the VmHWM line of a process's status.
func peakRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
