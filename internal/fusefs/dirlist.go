package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// listingFS serves directory listings without OPENDIR and RELEASEDIR
// round trips. Once OPENDIR answers ENOSYS the kernel stops sending both
// (FUSE_NO_OPENDIR_SUPPORT) and keeps listings cached by default, as
// FOPEN_CACHE_DIR asks: a git round trips about 270 fewer times. go-fuse's
// node layer lists a directory through a handle, so listingFS opens one
// for each READDIR itself and keeps it for the READDIR that continues the
// same listing; a listing that starts over (offset 0) gets a fresh one.
type listingFS struct {
	fuse.RawFileSystem

	mu   sync.Mutex
	open map[uint64]listing // by node id: listings under way
}

// listing is a directory handle of the node layer and the offset at which
// its next READDIR continues.
type listing struct{ fh, next uint64 }

// maxListings bounds the handles kept for listings that were left unfinished.
const maxListings = 64

func newListingFS(raw fuse.RawFileSystem) *listingFS {
	return &listingFS{RawFileSystem: raw, open: map[uint64]listing{}}
}

func (l *listingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (l *listingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if in.Fh != 0 { // a handle the kernel opened itself
		return l.RawFileSystem.ReadDir(cancel, in, out)
	}
	fh, st := l.handle(cancel, in)
	if !st.Ok() {
		return st
	}
	own := *in
	own.Fh = fh
	st = l.RawFileSystem.ReadDir(cancel, &own, out)
	if st.Ok() && out.Offset != in.Offset { // entries came: more may follow
		l.keep(in.NodeId, listing{fh: fh, next: out.Offset})
	} else {
		l.release(in.InHeader, fh)
	}
	return st
}

// handle returns the handle of the listing that continues at in.Offset,
// or opens one.
func (l *listingFS) handle(cancel <-chan struct{}, in *fuse.ReadIn) (uint64, fuse.Status) {
	l.mu.Lock()
	kept, ok := l.open[in.NodeId]
	delete(l.open, in.NodeId)
	l.mu.Unlock()
	if ok {
		if kept.next == in.Offset && in.Offset != 0 {
			return kept.fh, fuse.OK
		}
		l.release(in.InHeader, kept.fh)
	}
	var out fuse.OpenOut
	st := l.RawFileSystem.OpenDir(cancel, &fuse.OpenIn{InHeader: in.InHeader}, &out)
	return out.Fh, st
}

func (l *listingFS) keep(node uint64, d listing) {
	type handle struct{ node, fh uint64 }
	var drop []handle
	l.mu.Lock()
	if old, ok := l.open[node]; ok { // another listing of it went on meanwhile
		drop = append(drop, handle{node, old.fh})
		delete(l.open, node)
	}
	for id, e := range l.open { // map order is random
		if len(l.open) < maxListings {
			break
		}
		drop = append(drop, handle{id, e.fh})
		delete(l.open, id)
	}
	l.open[node] = d
	l.mu.Unlock()
	for _, h := range drop {
		l.release(fuse.InHeader{NodeId: h.node}, h.fh)
	}
}

// Forget drops a listing kept for the node first: once the kernel lets go
// of it, its node id may name another directory later.
func (l *listingFS) Forget(node, nlookup uint64) {
	l.mu.Lock()
	kept, ok := l.open[node]
	delete(l.open, node)
	l.mu.Unlock()
	if ok {
		l.release(fuse.InHeader{NodeId: node}, kept.fh)
	}
	l.RawFileSystem.Forget(node, nlookup)
}

func (l *listingFS) release(h fuse.InHeader, fh uint64) {
	l.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: h, Fh: fh})
}
