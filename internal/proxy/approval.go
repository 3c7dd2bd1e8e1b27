package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// Kinds of the approval's own checks.
const (
	// ApprovalForged is an approval whose record was not approved by
	// `avfs proxy approve`: it was created or edited on disk, so its MAC
	// does not match the request it says it approves.
	ApprovalForged errs.Kind = "ApprovalForged"
	// ApprovalFromRun is `proxy approve` or `proxy reject` called from
	// inside a proxy run: approving is a person's act, never a command's.
	ApprovalFromRun errs.Kind = "ApprovalFromRun"
)

// An approval is bound to the request it approves by an HMAC-SHA256
// under a key only `avfs proxy approve` uses, kept 0600 in
// $AVFS_HOME/keys/approval.key. A run record edited or created on disk
// therefore never counts as an approval. The key is out of an isolated
// run's view ($AVFS_HOME is hidden from it); a run without isolation is
// the same user and can read it (docs/proxy.md, Known limits).
const (
	keyDir     = "keys"
	keyFile    = "approval.key"
	keySize    = 32
	macContext = "avfs approval v1"
)

// approvalKey reads the home's approval key, creating it when create is
// set. A key that others could read or write is refused.
func approvalKey(home string, create bool) ([]byte, error) {
	dir := filepath.Join(home, keyDir)
	path := filepath.Join(dir, keyFile)
	b, err := readKey(path)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, &errs.Error{Kind: errs.IoError, Op: "proxy approve", Path: dir, Err: err}
		}
		key := make([]byte, keySize)
		if _, err := rand.Read(key); err != nil {
			return nil, &errs.Error{Kind: errs.IoError, Op: "proxy approve", Err: err}
		}
		// Written whole under a temporary name, then linked into place:
		// a racing approve sees no key or the whole key, never a part.
		ferr := writeKey(dir, path, key)
		if ferr == nil {
			return key, nil
		}
		if !errors.Is(ferr, os.ErrExist) {
			return nil, &errs.Error{Kind: errs.IoError, Op: "proxy approve", Path: path, Err: ferr}
		}
		b, err = readKey(path) // another approve made it first
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, &errs.Error{Kind: ApprovalForged, Op: "proxy", Path: path,
			Err: errors.New("no approval key: nothing was approved with `avfs proxy approve` in this home")}
	}
	return b, err
}

// writeKey puts key at path, 0600, unless a file is there already
// (an error wrapping os.ErrExist).
func writeKey(dir, path string, key []byte) error {
	f, err := os.CreateTemp(dir, ".approval.key-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp, path)
}

func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy", Path: path, Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy", Path: path, Err: err}
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm()&0o077 != 0 || st != nil && int(st.Uid) != os.Geteuid() || !fi.Mode().IsRegular() {
		return nil, &errs.Error{Kind: errs.PermissionDenied, Op: "proxy", Path: path,
			Err:  fmt.Errorf("the approval key is %v, owned by uid %d: only its owner may read it", fi.Mode(), uidOf(st)),
			Hint: "remove it; the next `avfs proxy approve` makes a new one (approvals made with the old key stop counting)"}
	}
	b := make([]byte, keySize+1)
	n, _ := f.Read(b)
	if n != keySize {
		return nil, &errs.Error{Kind: errs.CorruptVault, Op: "proxy", Path: path, Err: fmt.Errorf("the approval key is %d bytes, not %d", n, keySize)}
	}
	return b[:n], nil
}

func uidOf(st *syscall.Stat_t) int {
	if st == nil {
		return -1
	}
	return int(st.Uid)
}

// approvalMAC binds an approval to what it approves: the run's id, vault,
// working directory, command and its mode, and the expiry.
func approvalMAC(key []byte, e *Envelope) string {
	m := hmac.New(sha256.New, key)
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	field(macContext)
	field(e.ID)
	field(e.Request.Vault)
	field(e.Request.Cwd)
	field(e.Request.CommandMode)
	field(strconv.Itoa(len(e.Request.Command)))
	for _, a := range e.Request.Command {
		field(a)
	}
	field(e.Result.Approval.ExpiresAt.UTC().Format(time.RFC3339Nano))
	return hex.EncodeToString(m.Sum(nil))
}

// checkMAC reports an approved record whose MAC does not match.
func checkMAC(st *Store, a *Envelope) error {
	forged := &errs.Error{Kind: ApprovalForged, Op: "proxy", Err: fmt.Errorf("approval %s was not made by `avfs proxy approve`: its record was created or edited", a.ID),
		Hint: "ask for the command again and have a person approve it"}
	ap := a.Result.Approval
	if ap.MAC == nil {
		return forged
	}
	key, err := st.r.key(false)
	if err != nil {
		if errs.Is(err, ApprovalForged) {
			return forged
		}
		return err
	}
	got, err := hex.DecodeString(*ap.MAC)
	want, _ := hex.DecodeString(approvalMAC(key, a))
	if err != nil || !hmac.Equal(got, want) {
		return forged
	}
	return nil
}

// usedFile is the ledger of used approvals: "APPROVAL RUN" lines,
// appended under the store's lock. An approval is used once; restoring
// its record (status and MAC) after the use does not make it count.
const usedFile = "approvals.used"

// markUsed appends an approval to the ledger, durably, before the run
// that uses it starts.
func markUsed(home, approval, run string) error {
	dir := filepath.Join(home, keyDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy exec", Path: dir, Err: err}
	}
	path := filepath.Join(dir, usedFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy exec", Path: path, Err: err}
	}
	_, err = fmt.Fprintf(f, "%s %s\n", approval, run)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy exec", Path: path, Err: err}
	}
	return nil
}

// usedBy is the run that used an approval, by the ledger ("" if none).
func usedBy(home, approval string) string {
	b, err := os.ReadFile(filepath.Join(home, keyDir, usedFile))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if id, run, ok := strings.Cut(line, " "); ok && id == approval {
			return run
		}
	}
	return ""
}

// RunMarker is the environment variable every run's command gets: the
// name of the run's vault, the same in every run of it (see childEnv).
const RunMarker = "AVFS_PROXY_RUN"

// outsideRun refuses when this process is inside a proxy run: the run's
// marker in the environment, or an ancestor process that is running a
// proxy command (registered in $AVFS_HOME/proxy/live). A run can unset
// the variable; it cannot make itself another process's child, short of
// leaving its ancestry (a double fork to init), which isolation's PID
// namespace and hidden $AVFS_HOME close.
func (rt *Runtime) outsideRun(op string) error {
	getenv := rt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if id := getenv(RunMarker); id != "" {
		return &errs.Error{Kind: ApprovalFromRun, Op: op, Err: fmt.Errorf("called from inside a proxy run of vault %s ($%s is set)", id, RunMarker),
			Hint: "a person approves or rejects, from outside any run"}
	}
	pid := os.Getpid()
	for range 128 {
		ppid, start, ok := procStat(pid)
		if !ok {
			break
		}
		if id := liveRunOf(rt.Home.Dir, pid, start); id != "" {
			return &errs.Error{Kind: ApprovalFromRun, Op: op, Err: fmt.Errorf("called from inside proxy run %s (process %d runs it)", id, pid),
				Hint: "a person approves or rejects, from outside any run"}
		}
		if ppid <= 1 {
			break
		}
		pid = ppid
	}
	return nil
}

// procStat reads a process's parent and start time from /proc.
func procStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp ... starttime is field 22 of the whole line
	if len(f) < 20 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[19], err == nil
}

func liveDir(home string) string { return filepath.Join(home, "proxy", "live") }

// liveRunOf is the run process pid (started at start) is running, if any.
func liveRunOf(home string, pid int, start string) string {
	paths, _ := filepath.Glob(filepath.Join(liveDir(home), strconv.Itoa(pid)+"-*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		id, st, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if st == start {
			return id
		}
	}
	return ""
}

// markLive registers this process as running run id until the returned
// function is called, so that `proxy approve` in the run's process tree
// knows where it is. A run that cannot be registered does not start.
func (rt *Runtime) markLive(id string) (func(), error) {
	_, start, ok := procStat(os.Getpid())
	if !ok {
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy exec", Err: errors.New("cannot read this process's /proc/self/stat")}
	}
	dir := liveDir(rt.Home.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy exec", Path: dir, Err: err}
	}
	pruneLive(dir)
	p := filepath.Join(dir, fmt.Sprintf("%d-%s", os.Getpid(), id))
	if err := os.WriteFile(p, []byte(id+" "+start+"\n"), 0o600); err != nil {
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy exec", Path: p, Err: err}
	}
	return func() { os.Remove(p) }, nil
}

// pruneLive removes the registrations of processes that are gone (a run
// killed before it could remove its own), so the directory stays small.
func pruneLive(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		pidText, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		_, start, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if _, now, alive := procStat(pid); !alive || now != start {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
