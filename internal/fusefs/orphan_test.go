package fusefs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// TestUnlinkedWhileOpen checks that a file unlinked while open keeps
// working through its descriptor, as on a local disk, and that the vault
// lets go of it once it is closed.
func TestUnlinkedWhileOpen(t *testing.T) {
	for _, engine := range []string{"sqlite", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			f := mountVault(t, engine, false)
			p := filepath.Join(f.Mnt, "tmp")
			fd, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fd.WriteString("kept after unlink"); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("stat after unlink: %v", err)
			}
			if _, err := fd.WriteAt(make([]byte, 3*vfs.ChunkSize), 17); err != nil {
				t.Errorf("write after unlink: %v", err)
			}
			if err := fd.Sync(); err != nil {
				t.Errorf("fsync after unlink: %v", err)
			}
			buf := make([]byte, 17)
			if _, err := fd.ReadAt(buf, 0); err != nil || string(buf) != "kept after unlink" {
				t.Errorf("read after unlink: %q, %v", buf, err)
			}
			st, err := fd.Stat()
			if err != nil || st.Size() != 17+3*vfs.ChunkSize {
				t.Errorf("fstat after unlink: %v, %v", st, err)
			}
			fd.Close()
			if engine == "bolt" {
				return // the vault file is the mount's alone; fsck at cleanup checks it
			}
			// Once closed, the kernel forgets the inode and the mount
			// releases it: the vault, as other processes see it, holds
			// no orphan.
			v, err := f.Home.Open(f.Name)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				var orphans []vfs.Ino
				var u vfs.Usage
				if err := v.View(func(tx *vfs.Tx) (err error) {
					if orphans, err = tx.Orphans(); err == nil {
						u, err = tx.Usage()
					}
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if len(orphans) == 0 && u.Files == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("closed unlinked file still held: orphans %v, usage %+v", orphans, u)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
