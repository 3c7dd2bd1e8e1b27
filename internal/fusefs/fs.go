// Package fusefs is a vault as a go-fuse filesystem: the nodes, the
// write-back cache and its batching, directory listings and xattrs.
//
// The nodes (node*.go) are thin clients of the filesystem model in package
// vfs: every metadata request is one vault transaction, file writes go
// through a bounded write-back cache persisted in batches (writeback.go,
// which states the durability guarantee), and the vault's inode
// numbers are the FUSE inode numbers, so they are stable across remounts.
// The mount is the vault's only writer, so the kernel is told to cache
// entries and attributes for long, keep file pages across opens, and skip
// the OPEN, RELEASE and FLUSH round trips altogether.
//
// It knows nothing of processes, records or locks: package mountd serves
// an FS from its own process and holds the vault's locks while it does.
package fusefs

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// Options describe how an FS serves its vault.
type Options struct {
	ReadOnly bool
	// Name names the mount in the kernel's table (fuse.avfs, avfs:Name).
	Name string
	// HostDir is a directory on the host disk beside the vault file: an
	// unlimited vault reports that disk's free space as its capacity.
	HostDir string
	// Logger receives unexpected vault errors.
	Logger *log.Logger
	// Debug logs every FUSE request to Logger.
	Debug bool
	// WriteBudget bounds the memory holding written data not yet in the
	// vault (64 MiB when zero).
	WriteBudget int64
	// NoGC turns off the background garbage collection (gc.go): the
	// benchmark's baseline for what it costs.
	NoGC bool
}

// FS is one vault served over FUSE. New prepares it, Serve mounts it,
// and Close persists what it buffers once the kernel has let go.
type FS struct {
	opts Options
	v    *vfs.Vault
	st   *store
	wb   *writeback // nil on a read-only mount
}

// New prepares v to be served: a read-write FS becomes v's only writer
// (it keeps unlinked files while they are open, caches reads and
// collects garbage) and first releases the files a crashed server left
// unlinked but kept.
func New(v *vfs.Vault, o Options) (*FS, error) {
	if o.Logger == nil {
		o.Logger = log.New(io.Discard, "", 0)
	}
	f := &FS{opts: o, v: v, st: newStore(v, o.Logger, !o.ReadOnly)}
	if o.ReadOnly {
		return f, nil
	}
	v.SetKeepOrphans(true)
	v.CacheReads() // the mount is the vault's only writer
	if !o.NoGC {
		f.st.gc = startCollector(v, o.Logger)
	}
	if err := releaseOrphans(f.st); err != nil {
		f.st.gc.close()
		return nil, err
	}
	budget := o.WriteBudget
	if budget <= 0 {
		budget = defaultBudget
	}
	wb, err := newWriteback(f.st, o.Logger, budget)
	if err != nil {
		f.st.gc.close()
		return nil, err
	}
	f.wb = wb
	return f, nil
}

// Serve mounts the FS at dir and serves it until it is unmounted; it
// returns once the kernel has answered the mount's first request.
func (f *FS) Serve(dir string) (*fuse.Server, error) {
	o := f.opts
	timeout := cacheTimeout
	fopts := &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		RootStableAttr:  &fs.StableAttr{Ino: uint64(vfs.RootIno)},
		// Every mode reaches the kernel as stored: go-fuse would show
		// 0000 as 0644 (0755 for a directory), and the kernel checks
		// permissions against what it is shown.
		NullPermissions: true,
		Logger:          o.Logger,
		MountOptions: fuse.MountOptions{
			FsName:            "avfs:" + o.Name,
			Name:              "avfs",
			DirectMount:       true,
			DirectMountStrict: os.Geteuid() == 0, // others mount through fusermount3
			AllowOther:        os.Geteuid() == 0,
			// The kernel checks permissions against the mode bits, as
			// on a local disk.
			Options: []string{"default_permissions"},
			// READDIRPLUS would cost a vault lookup per entry on every
			// listing; the kernel already holds the entries it needs.
			DisableReadDirPlus: true,
			MaxWrite:           1 << 20,
			MaxReadAhead:       1 << 20,
			Debug:              o.Debug,
			Logger:             o.Logger,
		},
	}
	if o.ReadOnly {
		fopts.DirectMountFlags = mountReadOnly
	}
	root := &node{fs: &fsys{st: f.st, readonly: o.ReadOnly, hostDir: o.HostDir, wb: f.wb}}
	return serve(dir, newListingFS(fs.NewNodeFS(root, fopts)), &fopts.MountOptions)
}

// serve mounts raw at dir and serves it, as fs.Mount does for a node tree.
func serve(dir string, raw fuse.RawFileSystem, opts *fuse.MountOptions) (*fuse.Server, error) {
	server, err := fuse.NewServer(raw, dir, opts)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// Exclusive runs fn with everything written through the mount in the
// vault and no change of the mount's running beside it.
func (f *FS) Exclusive(fn func(*vfs.Vault) error) error {
	if f.wb != nil {
		if err := f.wb.persistAll(); err != nil {
			return err
		}
	}
	return f.st.exclusive(fn)
}

// Activity counts the requests served so far: a count that has not moved
// means the mount is idle.
func (f *FS) Activity() uint64 { return f.st.activity() }

// Close persists the buffered writes, releases the files kept while
// open and makes the vault durable; the vault stays open for the caller
// to close. Call it once the kernel has let go of the mount.
func (f *FS) Close() error {
	var err error
	if f.wb != nil {
		if werr := f.wb.close(); werr != nil {
			err = fmt.Errorf("persisting buffered writes: %w", werr)
		}
		rerr := releaseOrphans(f.st)
		if rerr == nil {
			rerr = f.st.sync()
		}
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("releasing unlinked files: %w", rerr))
		}
	}
	f.st.gc.close()
	return err
}
