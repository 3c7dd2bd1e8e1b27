// Package fsynctest serves a temporary directory through a FUSE loopback
// that counts the fsyncs made in it and can fail them, so that a test sees
// whether code really syncs a file and its directory, and what it does
// when the disk reports an error. The kernel delivers the fsyncs; nothing
// is simulated but the error.
package fsynctest

import (
	"context"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted loopback of a temporary directory.
type FS struct {
	// Dir is the mountpoint: work here to be seen.
	Dir string
	// Backing is the directory served, for a look behind the mount.
	Backing string

	mu    sync.Mutex
	files map[string]int // fsyncs of files, by path under Dir
	dirs  map[string]int // fsyncs of directories ("" is Dir itself)
	fail  bool
}

// Mount serves a new temporary directory at another one until the test
// ends. It skips the test where FUSE cannot be mounted (not root, no
// /dev/fuse).
func Mount(t testing.TB) *FS {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /dev/fuse")
	}
	s := &FS{Dir: t.TempDir(), Backing: t.TempDir(), files: map[string]int{}, dirs: map[string]int{}}
	lb, err := fs.NewLoopbackRoot(s.Backing)
	if err != nil {
		t.Fatal(err)
	}
	rootNode := &node{LoopbackNode: lb.(*fs.LoopbackNode), s: s}
	server, err := fs.Mount(s.Dir, rootNode, &fs.Options{MountOptions: fuse.MountOptions{
		FsName: "fsynctest", Name: "fsynctest", DirectMount: true,
	}})
	if err != nil {
		t.Skipf("FUSE mount refused: %v", err)
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			_ = syscall.Unmount(s.Dir, syscall.MNT_DETACH)
		}
	})
	return s
}

// Fail makes every later fsync fail with EIO (on) or pass (off).
func (s *FS) Fail(on bool) {
	s.mu.Lock()
	s.fail = on
	s.mu.Unlock()
}

// FileSyncs is the number of fsyncs of files whose path under Dir matched
// keep.
func (s *FS) FileSyncs(keep func(path string) bool) int { return s.count(s.files, keep) }

// DirSyncs is the number of fsyncs of directory path under Dir ("" for
// Dir).
func (s *FS) DirSyncs(path string) int {
	return s.count(s.dirs, func(p string) bool { return p == path })
}

func (s *FS) count(m map[string]int, keep func(string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, c := range m {
		if keep(p) {
			n += c
		}
	}
	return n
}

// synced records an fsync and says how it ends.
func (s *FS) synced(m map[string]int, path string) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	m[path]++
	if s.fail {
		return syscall.EIO
	}
	return 0
}

type node struct {
	*fs.LoopbackNode
	s *FS
}

var (
	_ = (fs.NodeWrapChilder)((*node)(nil))
	_ = (fs.NodeFsyncer)((*node)(nil))
	_ = (fs.NodeOpendirHandler)((*node)(nil))
	_ = (fs.FileFsyncdirer)((*dirHandle)(nil))
)

// WrapChild makes every node of the tree one that counts.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), s: n.s}
}

// Fsync of a file: the bridge asks the node before the file handle.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if errno := n.s.synced(n.s.files, n.Path(nil)); errno != 0 {
		return errno
	}
	if f, ok := fh.(fs.FileFsyncer); ok {
		return f.Fsync(ctx, flags)
	}
	return 0
}

// OpendirHandle wraps the loopback's directory handle, whose Fsyncdir the
// bridge would otherwise call instead of the node's Fsync.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	d := &dirHandle{n: n}
	d.FileReaddirenter, _ = fh.(fs.FileReaddirenter)
	d.FileReleasedirer, _ = fh.(fs.FileReleasedirer)
	d.FileSeekdirer, _ = fh.(fs.FileSeekdirer)
	d.inner = fh
	return d, fl, 0
}

type dirHandle struct {
	fs.FileReaddirenter
	fs.FileReleasedirer
	fs.FileSeekdirer
	inner fs.FileHandle
	n     *node
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if errno := d.n.s.synced(d.n.s.dirs, d.n.Path(nil)); errno != 0 {
		return errno
	}
	if f, ok := d.inner.(fs.FileFsyncdirer); ok {
		return f.Fsyncdir(ctx, flags)
	}
	return 0
}
