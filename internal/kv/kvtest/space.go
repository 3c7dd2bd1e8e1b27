package kvtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// testScanSizes checks that kv.ScanSizes lists what Scan lists, with the
// length of each value, and kv.ScanKeys the keys.
func testScanSizes(t *testing.T, e kv.Engine) {
	put(t, e, "a", "", "b", "12345", "c", string(make([]byte, 70000)), "d", "x")
	var got []string
	must(t, e.View(func(tx kv.Tx) error {
		return kv.ScanSizes(tx, []byte("a"), []byte("d"), func(k []byte, n int) (bool, error) {
			got = append(got, fmt.Sprintf("%s=%d", k, n))
			return true, nil
		})
	}))
	if want := "[a=0 b=5 c=70000]"; fmt.Sprint(got) != want {
		t.Fatalf("ScanSizes = %v, want %v", got, want)
	}
	got = nil
	must(t, e.View(func(tx kv.Tx) error {
		return kv.ScanKeys(tx, []byte("b"), nil, func(k []byte) (bool, error) {
			got = append(got, string(k))
			return true, nil
		})
	}))
	if want := "[b c d]"; fmt.Sprint(got) != want {
		t.Fatalf("ScanKeys = %v, want %v", got, want)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// testReclaim fills an engine with 16 MiB, deletes all but one value and
// checks that an engine which says it can reclaim gives the room back:
// the file shrinks, what was kept reads the same, and later writes work.
func testReclaim(t *testing.T, e kv.Engine) {
	r, ok := e.(kv.Reclaimer)
	if ok {
		if _, err := r.Space(); errors.Is(err, kv.ErrNoReclaim) {
			ok = false
		}
	}
	if !ok {
		t.Skipf("engine %s cannot reclaim space", e.Name())
	}
	const n, size = 256, 64 << 10
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	for i := 0; i < n; i += 32 {
		must(t, e.Update(func(tx kv.Tx) error {
			for j := i; j < i+32; j++ {
				if err := tx.Put(fmt.Appendf(nil, "k%04d", j), val(j)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	full, err := r.Space()
	must(t, err)
	if full.UsedBytes < n*size {
		t.Fatalf("holding %d MiB: used %d bytes", n*size>>20, full.UsedBytes)
	}
	must(t, e.Update(func(tx kv.Tx) error {
		for j := 1; j < n; j++ {
			if err := tx.Delete(fmt.Appendf(nil, "k%04d", j)); err != nil {
				return err
			}
		}
		return nil
	}))
	sp, err := r.Space()
	must(t, err)
	if sp.FreeBytes < (n/2)*size || sp.UsedBytes > full.UsedBytes-(n/2)*size {
		t.Fatalf("after deleting %d MiB: free %d bytes, used %d (%d before)", n*size>>20,
			sp.FreeBytes, sp.UsedBytes, full.UsedBytes)
	}
	// The file as the data first filled it: an engine with a log may
	// hold the data there until a checkpoint, so the comparison is of the
	// file's largest size, which a reclaim must bring down.
	before := max(fileSize(t, e.Path()), int64(n*size/2))
	if sp.Incremental {
		var total int64
		for range 1000 {
			got, err := r.Reclaim(1 << 20)
			must(t, err)
			if got > 1<<20+64<<10 {
				t.Fatalf("Reclaim(1 MiB) gave back %d bytes", got)
			}
			if got == 0 {
				break
			}
			total += got
		}
		if total < (n/2)*size {
			t.Fatalf("reclaimed %d bytes of %d free", total, sp.FreeBytes)
		}
	} else {
		got, err := r.Reclaim(0)
		must(t, err)
		if got != 0 {
			t.Fatalf("Reclaim on an engine that is not incremental gave %d bytes", got)
		}
		must(t, r.Rewrite())
	}
	after, err := r.Space()
	must(t, err)
	if after.FreeBytes > 1<<20 {
		t.Errorf("after reclaiming: %d bytes still free", after.FreeBytes)
	}
	if sz := fileSize(t, e.Path()); sz > before/4 {
		t.Errorf("file %d bytes after reclaiming, %d before", sz, before)
	}
	if v, err := get(t, e, "k0000"); err != nil || v != string(val(0)) {
		t.Fatalf("kept value after reclaim: %d bytes, %v", len(v), err)
	}
	put(t, e, "later", "write")
	if v, err := get(t, e, "later"); err != nil || v != "write" {
		t.Fatalf("write after reclaim: %q, %v", v, err)
	}
	// Rewrite works on every reclaiming engine, incremental or not, and
	// reads go on beside it, nested ones too.
	done := make(chan error, 1)
	must(t, e.View(func(tx kv.Tx) error {
		go func() { done <- r.Rewrite() }()
		time.Sleep(20 * time.Millisecond)
		return e.View(func(tx2 kv.Tx) error {
			_, err := tx2.Get([]byte("k0000"))
			return err
		})
	}))
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Rewrite did not finish after the reads beside it ended")
	}
	if v, err := get(t, e, "k0000"); err != nil || v != string(val(0)) {
		t.Fatalf("kept value after rewrite: %d bytes, %v", len(v), err)
	}
}
