package vfs_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFsckBesideCheckpointDeletes: fsck reads each checkpoint's tree in a
// transaction of its own, after listing them; a checkpoint another writer
// deleted in between is gone, not a problem of the vault.
func TestFsckBesideCheckpointDeletes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newVault(t, engine)
		f.write("/a", "a")
		var stop atomic.Bool
		writerErr := make(chan error, 1)
		go func() {
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprint("k", i)
				if _, err := f.v.SaveCheckpoint(name, ""); err != nil {
					writerErr <- err
					return
				}
				if err := f.v.DeleteCheckpoint(name); err != nil {
					writerErr <- err
					return
				}
			}
			writerErr <- nil
		}()
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			r, err := f.v.Fsck()
			if err != nil {
				stop.Store(true)
				t.Fatal(err)
			}
			if !r.OK() {
				stop.Store(true)
				<-writerErr
				t.Fatalf("fsck beside a writer found problems:\n%s", strings.Join(r.Problems, "\n"))
			}
		}
		stop.Store(true)
		if err := <-writerErr; err != nil {
			t.Fatal(err)
		}
	})
}
