package kvtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
)

func testLargeValues(t *testing.T, e kv.Engine) {
	big := make([]byte, 4<<20)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(big)
	must(t, e.Update(func(tx kv.Tx) error {
		if err := tx.Put(b("big"), big); err != nil {
			return err
		}
		return tx.Put(b("next"), b("small"))
	}))
	must(t, e.View(func(tx kv.Tx) error {
		v, err := tx.Get(b("big"))
		if err != nil || !bytes.Equal(v, big) {
			t.Errorf("Get(big): len %d, err %v; want the 4 MiB written", len(v), err)
		}
		n := 0
		must(t, tx.Scan(nil, nil, func(k, v []byte) (bool, error) {
			if string(k) == "big" && !bytes.Equal(v, big) {
				t.Errorf("Scan: big value differs")
			}
			n++
			return true, nil
		}))
		if n != 2 {
			t.Errorf("Scan saw %d keys, want 2", n)
		}
		return nil
	}))
	put(t, e, "big", "small now")
	wantValue(t, e, "big", "small now")
}

func testManyKeys(t *testing.T, e kv.Engine) {
	const n = 10_000
	key := func(i int) []byte { return fmt.Appendf(nil, "key/%08d", i) }
	must(t, e.Update(func(tx kv.Tx) error {
		// Insert in a scrambled order; the engine must sort.
		for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
			if err := tx.Put(key(i), key(i*7)); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, e.View(func(tx kv.Tx) error {
		i := 0
		must(t, tx.Scan(b("key/"), kv.PrefixEnd(b("key/")), func(k, v []byte) (bool, error) {
			if !bytes.Equal(k, key(i)) || !bytes.Equal(v, key(i*7)) {
				return false, fmt.Errorf("entry %d is %q=%q", i, k, v)
			}
			i++
			return true, nil
		}))
		if i != n {
			t.Errorf("scanned %d keys, want %d", i, n)
		}
		for _, i := range []int{0, 1, n / 2, n - 1} {
			if v, err := tx.Get(key(i)); err != nil || !bytes.Equal(v, key(i*7)) {
				t.Errorf("Get(%q) = %q, %v", key(i), v, err)
			}
		}
		return nil
	}))
	must(t, e.Update(func(tx kv.Tx) error {
		for i := range n {
			if err := tx.Delete(key(i)); err != nil {
				return err
			}
		}
		return nil
	}))
	equal(t, "after deleting all", scanAll(t, e, nil, nil), nil)
}
