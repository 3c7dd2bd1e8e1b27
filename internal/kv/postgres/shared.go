package postgres

import (
	"bytes"
	"fmt"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// Shared keeps the keys under Prefix in Table, one store that every store
// of the database naming it shares, in the same transactions as the
// store's own keys (both are rows of avfs_pairs, read and written on one
// connection).
// avfs keeps the chunks of every vault of a store there: identical
// content is stored once, and a fork on another host copies nothing.
//
// The writers of all the stores sharing a store queue on one lock, as
// one store's do: a writer holds the lock of every store of the space
// (so a mount's batch, which holds it from its first step to its commit,
// delays the writers of other vaults of the store by as long).
//
// What the store's Scans and Deletes see of the range is everyone's: a
// caller must not treat a key there as its own to free (a collection
// must consider every store that shares it).
type Shared struct {
	Prefix []byte
	Table  string
}

// shared is a store's Shared, with the shared store's id.
type shared struct {
	prefix, end []byte // end: kv.PrefixEnd(prefix), nil when unbounded
	table       string
	id          int64
}

// span is one part of a scan: a range, and whether the shared store
// holds it.
type span struct {
	shared     bool
	start, end []byte
}

// storeOf is the id of the store that holds key.
func (db *DB) storeOf(key []byte) int64 {
	if db.shared != nil && bytes.HasPrefix(key, db.shared.prefix) {
		return db.shared.id
	}
	return db.id
}

// split cuts [start, end) at the shared range's bounds (nil end: no
// bound), in key order.
func (sh *shared) split(start, end []byte) []span {
	// less reports a < b, a nil b being +infinity.
	less := func(a, b []byte) bool { return b == nil || (a != nil && bytes.Compare(a, b) < 0) }
	minEnd := func(a, b []byte) []byte {
		if less(a, b) {
			return a
		}
		return b
	}
	maxStart := func(a, b []byte) []byte {
		if bytes.Compare(a, b) > 0 {
			return a
		}
		return b
	}
	var out []span
	add := func(shared bool, s, e []byte) {
		if s != nil && less(s, e) {
			out = append(out, span{shared, s, e})
		}
	}
	add(false, start, minEnd(end, sh.prefix))
	add(true, maxStart(start, sh.prefix), minEnd(end, sh.end))
	if sh.end != nil {
		add(false, maxStart(start, sh.end), end)
	}
	return out
}

func newShared(o *Shared) (*shared, error) {
	if o == nil {
		return nil, nil
	}
	if len(o.Prefix) == 0 || !tableRE.MatchString(o.Table) || o.Table == metaTable || o.Table == leaseTable {
		return nil, fmt.Errorf("kv/postgres: shared range: want a prefix and a table name of lower-case letters, digits and _, have %q", o.Table)
	}
	return &shared{prefix: bytes.Clone(o.Prefix), end: kv.PrefixEnd(o.Prefix), table: o.Table}, nil
}
