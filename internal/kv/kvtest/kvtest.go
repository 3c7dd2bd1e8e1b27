// Package kvtest is the conformance suite every kv.Engine must pass. Each
// engine package runs it from a _test.go file, so the in-memory engine that
// higher layers test against cannot drift from the engines that hold vaults.
package kvtest

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Run runs the suite. open must return a new, empty engine each time it is
// called, and may be called from parallel subtests; Run closes the engine
// when the subtest ends (open may register its own cleanup too: a second
// Close must be harmless).
func Run(t *testing.T, open func(t *testing.T) kv.Engine) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e kv.Engine)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"EmptyValues", testEmptyValues},
		{"InputsAreCopied", testInputsAreCopied},
		{"BinaryKeys", testBinaryKeys},
		{"ScanRanges", testScanRanges},
		{"ScanStop", testScanStop},
		{"NestedScan", testNestedScan},
		{"WriteDuringScan", testWriteDuringScan},
		{"ReadYourWrites", testReadYourWrites},
		{"RollbackOnError", testRollbackOnError},
		{"RollbackOnPanic", testRollbackOnPanic},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"ReadOnly", testReadOnly},
		{"TxAfterEnd", testTxAfterEnd},
		{"Closed", testClosed},
		{"ConcurrentWriters", testConcurrentWriters},
		{"LargeValues", testLargeValues},
		{"ManyKeys", testManyKeys},
		{"Batch", testBatch},
		{"ScanSizes", testScanSizes},
		{"Reclaim", testReclaim},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own engine; running them side by side
			// overlaps the file engines' fsyncs.
			t.Parallel()
			e := open(t)
			t.Cleanup(func() {
				if err := e.Close(); err != nil && !errors.Is(err, kv.ErrClosed) {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, e)
		})
	}
}

// --- helpers

func put(t *testing.T, e kv.Engine, kvs ...string) {
	t.Helper()
	must(t, e.Update(func(tx kv.Tx) error {
		for i := 0; i+1 < len(kvs); i += 2 {
			if err := tx.Put([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
				return err
			}
		}
		return nil
	}))
}

func get(t *testing.T, e kv.Engine, key string) (string, error) {
	t.Helper()
	var v []byte
	var gerr error
	must(t, e.View(func(tx kv.Tx) error {
		v, gerr = tx.Get([]byte(key))
		v = bytes.Clone(v)
		return nil
	}))
	return string(v), gerr
}

func wantValue(t *testing.T, e kv.Engine, key, want string) {
	t.Helper()
	got, err := get(t, e, key)
	if err != nil {
		t.Fatalf("Get(%q): %v, want %q", key, err, want)
	}
	if got != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantMissing(t *testing.T, e kv.Engine, key string) {
	t.Helper()
	if got, err := get(t, e, key); err != kv.ErrNotFound {
		t.Fatalf("Get(%q) = %q, %v; want kv.ErrNotFound (unwrapped)", key, got, err)
	}
}

// scan collects key=value pairs in [start, end).
func scan(t *testing.T, tx kv.Tx, start, end []byte) []string {
	t.Helper()
	var out []string
	must(t, tx.Scan(start, end, func(k, v []byte) (bool, error) {
		out = append(out, string(k)+"="+string(v))
		return true, nil
	}))
	return out
}

func scanAll(t *testing.T, e kv.Engine, start, end []byte) []string {
	t.Helper()
	var out []string
	must(t, e.View(func(tx kv.Tx) error { out = scan(t, tx, start, end); return nil }))
	return out
}

func b(s string) []byte { return []byte(s) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// --- tests

func testGetPutDelete(t *testing.T, e kv.Engine) {
	wantMissing(t, e, "a")
	put(t, e, "a", "1", "b", "2")
	wantValue(t, e, "a", "1")
	put(t, e, "a", "3")
	wantValue(t, e, "a", "3")
	must(t, e.Update(func(tx kv.Tx) error {
		if err := tx.Delete([]byte("a")); err != nil {
			return err
		}
		return tx.Delete([]byte("never-there"))
	}))
	wantMissing(t, e, "a")
	wantValue(t, e, "b", "2")

	must(t, e.Update(func(tx kv.Tx) error {
		for _, k := range [][]byte{nil, {}} {
			if err := tx.Put(k, []byte("x")); !errors.Is(err, kv.ErrEmptyKey) {
				t.Errorf("Put(%#v) = %v, want ErrEmptyKey", k, err)
			}
		}
		return nil
	}))
	// A value returned by Get stays valid until the transaction ends, even
	// across later calls.
	put(t, e, "c", "3")
	must(t, e.View(func(tx kv.Tx) error {
		b, err := tx.Get([]byte("b"))
		must(t, err)
		if _, err := tx.Get([]byte("c")); err != nil {
			return err
		}
		scan(t, tx, nil, nil)
		if string(b) != "2" {
			t.Errorf("value of b changed to %q after later reads", b)
		}
		return nil
	}))
}

func testEmptyValues(t *testing.T, e kv.Engine) {
	must(t, e.Update(func(tx kv.Tx) error {
		if err := tx.Put([]byte("nil"), nil); err != nil {
			return err
		}
		return tx.Put([]byte("empty"), []byte{})
	}))
	must(t, e.View(func(tx kv.Tx) error {
		for _, k := range []string{"nil", "empty"} {
			v, err := tx.Get([]byte(k))
			if err != nil || v == nil || len(v) != 0 {
				t.Errorf("Get(%q) = %#v, %v; want a non-nil empty value", k, v, err)
			}
		}
		return nil
	}))
	equal(t, "scan", scanAll(t, e, nil, nil), []string{"empty=", "nil="})
}

func testInputsAreCopied(t *testing.T, e kv.Engine) {
	k, v := []byte("key"), []byte("value")
	must(t, e.Update(func(tx kv.Tx) error {
		err := tx.Put(k, v)
		copy(k, "XXX")
		copy(v, "XXXXX")
		return err
	}))
	wantValue(t, e, "key", "value")
}

func testBinaryKeys(t *testing.T, e kv.Engine) {
	keys := []string{"\x00", "\x00\x00", "\x00\xff", "\x01", "a\x00b", "a", "\xff", "\xff\x00", "\xff\xff", "\x7f", "\x80"}
	must(t, e.Update(func(tx kv.Tx) error {
		for i, k := range keys {
			if err := tx.Put([]byte(k), []byte{byte(i)}); err != nil {
				return err
			}
		}
		return nil
	}))
	sorted := slices.Clone(keys)
	slices.Sort(sorted) // Go string order is byte order
	var want []string
	for _, k := range sorted {
		i := slices.Index(keys, k)
		want = append(want, k+"="+string([]byte{byte(i)}))
	}
	equal(t, "scan of binary keys", scanAll(t, e, nil, nil), want)
	for i, k := range keys {
		wantValue(t, e, k, string([]byte{byte(i)}))
	}
	wantMissing(t, e, "\x00\x00\x00")
}

func testScanRanges(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1", "b", "2", "ba", "3", "bb", "4", "c", "5", "\xff", "6", "\xff\xff", "7")
	all := []string{"a=1", "b=2", "ba=3", "bb=4", "c=5", "\xff=6", "\xff\xff=7"}
	tests := []struct {
		name       string
		start, end []byte
		want       []string
	}{
		{"nil nil", nil, nil, all},
		{"empty start", b(""), nil, all},
		{"start inclusive", b("b"), nil, all[1:]},
		{"end exclusive", b("a"), b("bb"), all[:3]},
		{"between keys", b("aa"), b("bz"), all[1:4]},
		{"start == end", b("b"), b("b"), nil},
		{"start > end", b("c"), b("a"), nil},
		{"empty end", nil, b(""), nil},
		{"past last", b("\xff\xff\x00"), nil, nil},
		{"prefix b", b("b"), kv.PrefixEnd(b("b")), all[1:4]},
		{"prefix ba", b("ba"), kv.PrefixEnd(b("ba")), all[2:3]},
		{"prefix 0xff", b("\xff"), kv.PrefixEnd(b("\xff")), all[5:]},
	}
	for _, tc := range tests {
		equal(t, tc.name, scanAll(t, e, tc.start, tc.end), tc.want)
	}
	if kv.PrefixEnd(b("\xff\xff")) != nil || !bytes.Equal(kv.PrefixEnd(b("a\xff")), b("b")) {
		t.Errorf("PrefixEnd is wrong")
	}
}

func testScanStop(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1", "b", "2", "c", "3", "d", "4")
	stop := errors.New("stop here")
	must(t, e.View(func(tx kv.Tx) error {
		n := 0
		err := tx.Scan(nil, nil, func(k, v []byte) (bool, error) { n++; return n < 2, nil })
		if err != nil || n != 2 {
			t.Errorf("early stop: %d calls, err %v; want 2, nil", n, err)
		}
		n = 0
		err = tx.Scan(nil, nil, func(k, v []byte) (bool, error) { n++; return true, stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("error from fn: %d calls, err %v; want 1, %v", n, err, stop)
		}
		// The transaction is still usable after a stopped scan.
		equal(t, "scan after stop", scan(t, tx, b("c"), nil), []string{"c=3", "d=4"})
		return nil
	}))
}

func testNestedScan(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1", "b", "2")
	check := func(tx kv.Tx) error {
		var pairs []string
		err := tx.Scan(nil, nil, func(k1, _ []byte) (bool, error) {
			return true, tx.Scan(nil, nil, func(k2, _ []byte) (bool, error) {
				v, err := tx.Get(k2)
				pairs = append(pairs, string(k1)+string(k2)+string(v))
				return true, err
			})
		})
		equal(t, "nested scan", pairs, []string{"aa1", "ab2", "ba1", "bb2"})
		return err
	}
	must(t, e.View(check))
	must(t, e.Update(check))
}

func testWriteDuringScan(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1", "b", "2")
	must(t, e.Update(func(tx kv.Tx) error {
		return tx.Scan(nil, nil, func(k, v []byte) (bool, error) {
			if err := tx.Put([]byte("z"), nil); err == nil {
				t.Errorf("Put during Scan succeeded, want an error")
			}
			if err := tx.Delete(k); err == nil {
				t.Errorf("Delete during Scan succeeded, want an error")
			}
			return true, nil
		})
	}))
	equal(t, "after", scanAll(t, e, nil, nil), []string{"a=1", "b=2"})
}

func testReadYourWrites(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1", "b", "2", "c", "3")
	must(t, e.Update(func(tx kv.Tx) error {
		must(t, tx.Put(b("b"), b("22")))
		must(t, tx.Put(b("bb"), b("new")))
		must(t, tx.Delete(b("c")))
		must(t, tx.Put(b("0"), b("first")))
		if v, err := tx.Get(b("b")); err != nil || string(v) != "22" {
			t.Errorf("Get(b) in tx = %q, %v", v, err)
		}
		if _, err := tx.Get(b("c")); err != kv.ErrNotFound {
			t.Errorf("Get(c) after Delete = %v, want ErrNotFound", err)
		}
		equal(t, "scan in tx", scan(t, tx, nil, nil), []string{"0=first", "a=1", "b=22", "bb=new"})
		equal(t, "range in tx", scan(t, tx, b("b"), b("c")), []string{"b=22", "bb=new"})
		// Delete then re-Put within one transaction.
		must(t, tx.Delete(b("a")))
		must(t, tx.Put(b("a"), b("again")))
		return nil
	}))
	equal(t, "after commit", scanAll(t, e, nil, nil), []string{"0=first", "a=again", "b=22", "bb=new"})
}

func testRollbackOnError(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1")
	boom := errors.New("boom")
	err := e.Update(func(tx kv.Tx) error {
		must(t, tx.Put(b("a"), b("changed")))
		must(t, tx.Put(b("b"), b("new")))
		return boom
	})
	if err != boom {
		t.Fatalf("Update = %v, want the fn's error unchanged", err)
	}
	equal(t, "after rollback", scanAll(t, e, nil, nil), []string{"a=1"})
	if err := e.View(func(kv.Tx) error { return boom }); err != boom {
		t.Fatalf("View = %v, want the fn's error unchanged", err)
	}
}

func testRollbackOnPanic(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1")
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("%s: recovered %v, want the original panic", name, r)
			}
		}()
		f()
	}
	mustPanic("Update", func() {
		_ = e.Update(func(tx kv.Tx) error {
			must(t, tx.Put(b("a"), b("changed")))
			panic("boom")
		})
	})
	// A panic in the middle of a scan leaves an open cursor behind in some
	// engines; the engine must still be usable afterwards.
	mustPanic("Update/Scan", func() {
		_ = e.Update(func(tx kv.Tx) error {
			must(t, tx.Put(b("b"), b("new")))
			return tx.Scan(nil, nil, func(k, v []byte) (bool, error) { panic("boom") })
		})
	})
	mustPanic("View/Scan", func() {
		_ = e.View(func(tx kv.Tx) error {
			return tx.Scan(nil, nil, func(k, v []byte) (bool, error) { panic("boom") })
		})
	})
	equal(t, "after panics", scanAll(t, e, nil, nil), []string{"a=1"})
	put(t, e, "c", "3")
	equal(t, "next update", scanAll(t, e, nil, nil), []string{"a=1", "c=3"})
}

func testReadOnly(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1")
	must(t, e.View(func(tx kv.Tx) error {
		if err := tx.Put(b("b"), b("2")); !errors.Is(err, kv.ErrReadOnly) {
			t.Errorf("Put in View = %v, want ErrReadOnly", err)
		}
		if err := tx.Delete(b("a")); !errors.Is(err, kv.ErrReadOnly) {
			t.Errorf("Delete in View = %v, want ErrReadOnly", err)
		}
		return nil
	}))
	equal(t, "after", scanAll(t, e, nil, nil), []string{"a=1"})
}

func testTxAfterEnd(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1")
	var rtx, wtx kv.Tx
	must(t, e.View(func(tx kv.Tx) error { rtx = tx; return nil }))
	must(t, e.Update(func(tx kv.Tx) error { wtx = tx; return nil }))
	// A leaked Tx must fail loudly, never read or write through whatever
	// transaction its connection runs next.
	must(t, e.View(func(kv.Tx) error {
		for name, tx := range map[string]kv.Tx{"view": rtx, "update": wtx} {
			if _, err := tx.Get(b("a")); err == nil {
				t.Errorf("%s: Get after end succeeded", name)
			}
			if err := tx.Scan(nil, nil, func(k, v []byte) (bool, error) { return true, nil }); err == nil {
				t.Errorf("%s: Scan after end succeeded", name)
			}
			if err := tx.Put(b("b"), nil); err == nil {
				t.Errorf("%s: Put after end succeeded", name)
			}
		}
		return nil
	}))
	wantMissing(t, e, "b")
}

func testClosed(t *testing.T, e kv.Engine) {
	put(t, e, "a", "1")
	must(t, e.Close())
	if err := e.View(func(kv.Tx) error { return nil }); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("View after Close = %v, want ErrClosed", err)
	}
	if err := e.Update(func(kv.Tx) error { return nil }); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Update after Close = %v, want ErrClosed", err)
	}
	if err := e.Close(); err != nil && !errors.Is(err, kv.ErrClosed) {
		t.Errorf("second Close = %v, want nil or ErrClosed", err)
	}
}
