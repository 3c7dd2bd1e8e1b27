package cli

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// dircycle VAULT DIR NAME TARGET damages vault VAULT of $AVFS_HOME: it
// writes an entry DIR/NAME naming directory TARGET straight into the top
// layer's records, below the model, which refuses to make one. With TARGET
// an ancestor of DIR the tree holds a cycle.
func cmdDircycle(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: dircycle VAULT DIR NAME TARGET")
	}
	h, err := registry.Open(ts.Getenv("AVFS_HOME"))
	ts.Check(err)
	v, err := h.Open(args[0])
	ts.Check(err)
	var dir, target vfs.Attr
	ts.Check(v.View(func(tx *vfs.Tx) (err error) {
		if dir, err = tx.Resolve(args[1], false); err != nil {
			return err
		}
		target, err = tx.Resolve(args[3], false)
		return err
	}))
	ts.Check(v.Close())
	eng, err := engines.Open(h.Path(args[0]))
	ts.Check(err)
	defer eng.Close()
	ts.Check(eng.Update(func(kt kv.Tx) error {
		top, err := kt.Get([]byte("Mtop"))
		if err != nil {
			return err
		}
		k := binary.BigEndian.AppendUint64([]byte{'D'}, uint64(dir.Ino))
		k = append(append(k, args[2]...), 0)
		k = binary.BigEndian.AppendUint64(k, ^binary.BigEndian.Uint64(top))
		val := binary.BigEndian.AppendUint64(nil, uint64(target.Ino))
		return kt.Put(k, append(val, byte(vfs.TypeDir)))
	}))
}

// mkfifo PATH makes a FIFO on the host.
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkfifo PATH")
	}
	p := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(filepath.Dir(p), 0o700))
	ts.Check(syscall.Mkfifo(p, 0o600))
}

// A full host disk during export is the host's failure, IoError (exit 1)
// with the errno and the host path, not the vault's QuotaExceeded.
func TestExportToFullHostDiskIsIoError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	small := t.TempDir()
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(small, 0); err != nil {
			t.Errorf("unmount %s: %v", small, err)
		}
	})
	r := newRunner(t)
	r.ok("vault", "create", "v", "--use")
	src := filepath.Join(t.TempDir(), "big")
	writeRandom(t, src, 3<<20)
	r.ok("import", src, "/big")
	code, out, _ := r.run("", "export", "/big", filepath.Join(small, "out"), "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("export output %q: %v", out, err)
	}
	if code != 1 || doc["error"] != "IoError" || doc["errno"] != "ENOSPC" ||
		!strings.HasPrefix(doc["host_path"].(string), small) {
		t.Errorf("export to a full disk: exit %d, %v", code, doc)
	}
}
