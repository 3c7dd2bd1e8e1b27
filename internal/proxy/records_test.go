package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/postgres/pgtest"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// storeHomes are n homes on one fresh store, standing in for n hosts,
// each with its runtime.
func storeHomes(t *testing.T, n int) []*Runtime {
	t.Helper()
	dsn := pgtest.DSN(t)
	var out []*Runtime
	for range n {
		h, err := registry.OpenWith(t.TempDir(), registry.Options{Store: dsn})
		if err != nil {
			t.Fatal(err)
		}
		s, err := OpenStore(h)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &Runtime{Home: h, Store: s, Getenv: func(string) string { return "" }})
	}
	return out
}

// pending records a run of home rt awaiting approval, as exec does.
func pending(t *testing.T, rt *Runtime, cmd string) *Envelope {
	t.Helper()
	now := time.Now().UTC()
	id := newID(now)
	e := &Envelope{SchemaVersion: SchemaVersion, Kind: Kind, ID: id, CreatedAt: now,
		Request: RequestInfo{Vault: "v", Cwd: "/", Command: []string{cmd}, CommandMode: "argv", Changes: ChangesFull},
		Result:  Result{State: StateAwaitingApproval, Approval: &Approval{ID: id, Status: "pending", ExpiresAt: now.Add(time.Hour)}}}
	if err := rt.Store.Put(e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestStoreRecordsShared: a run recorded by one home of a store is read
// and listed by another; an approval asked on one is approved on a
// second and used once, on any: the key and the used ledger are the
// store's, and no home has a key file.
func TestStoreRecordsShared(t *testing.T) {
	rts := storeHomes(t, 3)
	a, b, c := rts[0], rts[1], rts[2]
	e := pending(t, a, "echo")
	got, err := b.Store.Get(e.ID)
	if err != nil || got.Request.Command[0] != "echo" {
		t.Fatalf("the other home reads %+v, %v", got, err)
	}
	if runs, err := b.Store.List("v"); err != nil || len(runs) != 1 || runs[0].ID != e.ID {
		t.Fatalf("the other home lists %v, %v", runs, err)
	}
	if _, err := b.Store.Get("20990101T000000.000000000-00000000"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a missing run: %v", err)
	}
	if err := a.approvalUsable(a.Store, e); !errs.Is(err, ApprovalRequired) {
		t.Fatalf("before approve: %v", err)
	}
	if _, err := b.Decide(e.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decide(e.ID, true); !errs.Is(err, errs.AlreadyExists) {
		t.Fatalf("approved twice: %v", err)
	}
	approved, err := c.Store.Get(e.ID)
	if err != nil || approved.Result.Approval.MAC == nil {
		t.Fatalf("the approved record: %+v, %v", approved, err)
	}
	for _, rt := range rts {
		if _, err := os.Stat(filepath.Join(rt.Home.Dir, keyDir)); !os.IsNotExist(err) {
			t.Errorf("home %s has a keys directory (%v): the key is the store's", rt.Home.Dir, err)
		}
	}

	// Used exactly once, however many homes try at the same time.
	var wg sync.WaitGroup
	results := make([]error, len(rts))
	for i, rt := range rts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = rt.useApproval(e.ID, fmt.Sprintf("run-%d", i))
		}()
	}
	wg.Wait()
	used := 0
	for i, err := range results {
		switch {
		case err == nil:
			used++
		case !errs.Is(err, ApprovalUsed):
			t.Errorf("home %d: %v", i, err)
		}
	}
	if used != 1 {
		t.Fatalf("the approval was used %d times: %v", used, results)
	}

	// Its record put back as it was approved (status and MAC) does not
	// count again: the ledger is the store's.
	if err := a.Store.Put(approved); err != nil {
		t.Fatal(err)
	}
	if _, err := c.useApproval(e.ID, "again"); !errs.Is(err, ApprovalUsed) {
		t.Fatalf("a used approval put back: %v", err)
	}

	// An approved record whose command is edited in the table is forged.
	r := pending(t, a, "echo")
	if _, err := b.Decide(r.ID, true); err != nil {
		t.Fatal(err)
	}
	r, _ = a.Store.Get(r.ID)
	r.Request.Command = []string{"rm"}
	if err := b.Store.Put(r); err != nil {
		t.Fatal(err)
	}
	if _, err := c.useApproval(r.ID, "forged"); !errs.Is(err, ApprovalForged) {
		t.Fatalf("an edited command: %v", err)
	}
}

// TestStoreRecordsNoKey: on a store where nothing was approved, an
// approved record is forged (no key), and a file home is untouched.
func TestStoreRecordsNoKey(t *testing.T) {
	a := storeHomes(t, 1)[0]
	e := pending(t, a, "echo")
	mac := "00"
	e.Result.Approval.Status, e.Result.Approval.MAC = "approved", &mac
	if err := a.Store.Put(e); err != nil {
		t.Fatal(err)
	}
	if _, err := a.useApproval(e.ID, "x"); !errs.Is(err, ApprovalForged) {
		t.Fatalf("no key in the store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.Home.Dir, "proxy", "runs")); !os.IsNotExist(err) {
		t.Errorf("a store's home has a runs directory: %v", err)
	}
}

// TestStoreRecordsLocked: the records' lock of one home of a store holds
// off another home's until it is given back.
func TestStoreRecordsLocked(t *testing.T) {
	rts := storeHomes(t, 2)
	held, release := make(chan struct{}), make(chan struct{})
	errA := make(chan error, 1)
	go func() {
		errA <- rts[0].Store.locked(func(*Store) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	entered := make(chan error, 1)
	go func() { entered <- rts[1].Store.locked(func(*Store) error { return nil }) }()
	select {
	case err := <-entered:
		t.Fatalf("the second home took the lock while the first held it (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
}
