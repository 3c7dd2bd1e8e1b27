//go:build linux

package overlaymount

import (
	"fmt"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// Recover finishes the overlay runs of vault that a crash left in the
// layer cache at root (overlay.Cache.Recover): each is ingested whole,
// or removed when its ingest had committed. Every command that opens the
// vault calls it first, not only the next overlay run: a write made
// beside a pending upper would stand on the run's base, and the late
// ingest (which starts from a fresh layer over that base) would set it
// aside. A run whose process lives holds the vault's writer lock, so a
// locked vault is left alone. It costs a look at root's entries when no
// run of the vault waits.
func Recover(h *registry.Home, vault, root string) ([]overlay.Recovered, error) {
	c := &overlay.Cache{Root: root, Format: overlay.Trusted}
	if !c.Waiting(vault) {
		return nil, nil
	}
	l, err := mountrec.LockWriter(h, vault, "")
	if errs.Is(err, errs.VaultLocked) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer l.Release()
	v, err := h.Unguarded().Open(vault)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return c.Recover(v)
}

// Waiting lists the run dirs of vault (id: its vault ID) that wait for
// an ingest in the layer cache at root, none while a process holds the
// vault's writer lock (its run is live, not pending).
func Waiting(h *registry.Home, vault, id, root string) []string {
	if _, live := mountrec.Writer(h, vault); live {
		return nil
	}
	c := &overlay.Cache{Root: root}
	return c.Pending(id)
}

// Freed drops the entries of the layer cache at root that vault file
// vaultID's layers freed (registry.Home.Freed): layers nil, a deleted
// vault, all of them and its runs' dirs. An entry a live mount stands on
// is left to it (its shared lock) and swept by a later start.
func Freed(root, vaultID string, layers []uint64) error {
	c := &overlay.Cache{Root: root}
	if layers == nil {
		return c.Forget(vaultID)
	}
	freed := map[uint64]bool{}
	for _, l := range layers {
		freed[l] = true
	}
	return c.DropVault(vaultID, func(l uint64) bool { return !freed[l] })
}

// Follow makes the layer cache at root() (ok false: none was ever made)
// follow the vaults of h, for every front end alike (the CLI, the
// library): h.Freed drops what compaction, collection and deletion free,
// and h.BeforeOpen, after what it did already, ingests the runs a crash
// left (Recover) unless skip says not to (fsck, which reports them),
// telling warn of each run it finished.
func Follow(h *registry.Home, root func() (string, bool), skip func() bool, warn func(string)) {
	h.Freed = func(vaultID string, layers []uint64) {
		if r, ok := root(); ok {
			_ = Freed(r, vaultID, layers) // a cache: what stays is swept at the next start
		}
	}
	before := h.BeforeOpen
	h.BeforeOpen = func(vault string) error {
		if before != nil {
			if err := before(vault); err != nil {
				return err
			}
		}
		r, ok := root()
		if !ok || (skip != nil && skip()) {
			return nil
		}
		recs, err := Recover(h, vault, r)
		for _, rec := range recs {
			switch {
			case warn == nil:
			case rec.Err != nil:
				warn(fmt.Sprintf("the overlay run a crash left in %s was not ingested: %v", rec.Dir, rec.Err))
			case rec.Ingested:
				warn("ingested the overlay run a crash left in " + rec.Dir)
			}
		}
		return err
	}
}
