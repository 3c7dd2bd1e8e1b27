package vfs

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// FormatVersion is the on-disk format this build writes and reads.
const FormatVersion = 1

// Magic identifies an avfs vault inside its engine's file.
const Magic = "avfs-vault"

// knownFeatures are the format features this build understands. A vault
// that requires any other feature is refused, never misread.
//
// "gc-marker": writes that reuse a stored chunk delete the collection
// marker (gc.go). A build without it would not, and could map a chunk
// that a collection in progress then frees; the first collection adds
// the feature to a vault made before, so such builds refuse it from then
// on.
var knownFeatures = []string{"layers", "chunks-sha256-64k", featureXattrUsage, featureGCMarker}

// featureXattrUsage: the usage counters count extended attributes' names
// and values (xattr.go). A vault made before it counts them not, and
// keeps so, as do its forks: its counters were never charged for them.
const featureXattrUsage = "xattr-usage"

const featureGCMarker = "gc-marker"

// ChunkSize is the fixed size of a file data chunk.
const ChunkSize = 64 << 10

// Header is the versioned format record every vault starts with: the first
// key of its key space.
type Header struct {
	Magic         string    `json:"magic"`
	FormatVersion int       `json:"format_version"`
	Features      []string  `json:"features"`
	VaultID       string    `json:"vault_id"`
	Name          string    `json:"name"`
	CreatedAt     time.Time `json:"created_at"`
	ChunkSize     int       `json:"chunk_size"`
}

// forkBase records, in a fork, the parent vault and frozen layer it stands on.
type forkBase struct {
	VaultID string `json:"vault_id"`
	Name    string `json:"name"`
	Layer   uint64 `json:"layer"`
}

// Opener opens a fork's parent vault by name and checks its identity. The
// registry supplies it; a vault without forks never calls it.
type Opener func(name, vaultID string) (*Vault, error)

// Vault is an open vault: a filesystem made of a writable top layer over
// frozen layers, kept in one engine file (and, for a fork, the frozen layers
// of its parent's file).
type Vault struct {
	eng    kv.Engine
	hdr    Header
	opener Opener
	now    func() time.Time
	guard  func() error          // asked before changes of the working state; nil allows all
	freed  func(layers []uint64) // told of the layers compaction and collection deleted
	// keepOrphans keeps files that lose their last name (orphan.go).
	keepOrphans bool
	cache       *readCache // nil unless CacheReads
	verify      verifier   // the chunks reads verified (verify.go)

	mu      sync.Mutex
	cached  *chain   // own chain for the current topology
	bases   []seg    // the parent files' part of every chain; immutable once loaded
	parents []*Vault // opened parents, closed with this vault
	atClose []func() error
	closed  bool
}

// seg is the part of a chain that lives in one file: the layers of that file
// that the state can see.
type seg struct {
	v      *Vault
	layers map[uint64]bool
}

// chain is the ordered list of file segments a state reads through: own
// file first, then its parent's, and so on.
type chain struct {
	topo uint64 // topology counter it was built for
	top  uint64 // writable layer, or the layer a read-only state starts at
	segs []seg
}

// Create initialises an empty vault in a new, empty engine, in one
// transaction: until it commits the file holds nothing (ErrIncomplete).
func Create(eng kv.Engine, name string, quota Quota) (*Vault, error) {
	if err := quota.Check(); err != nil {
		return nil, err
	}
	now := time.Now()
	hdr := newHeader(name, now)
	err := eng.Update(func(kt kv.Tx) error {
		if err := initFile(kt, hdr, uint64(RootIno)+1, 2, quota, nil, layerRecord{Created: now}); err != nil {
			return err
		}
		// The root belongs to whoever creates the vault, so that a user
		// who is not root can write in its mount.
		root := &inode{Attr: Attr{Ino: RootIno, Type: TypeDir, Mode: 0o755, Nlink: 2,
			Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()),
			Atime: now, Mtime: now, Ctime: now}, birth: birthOf(hdr.VaultID)}
		if err := kt.Put(versionKey(inodeVKey(RootIno), 1), encodeInode(root)); err != nil {
			return err
		}
		return kt.Put(journalKey(1, inodeVKey(RootIno)), nil)
	})
	if err != nil {
		return nil, storageErr("vault create", name, err)
	}
	return &Vault{eng: eng, hdr: hdr, now: time.Now}, nil
}

func newHeader(name string, now time.Time) Header {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return Header{Magic: Magic, FormatVersion: FormatVersion, Features: knownFeatures,
		VaultID: hex.EncodeToString(id[:]), Name: name, CreatedAt: now.UTC(), ChunkSize: ChunkSize}
}

// initFile writes the header, metadata and first layer of a new vault file.
func initFile(kt kv.Tx, hdr Header, nextIno, nextLayer uint64, q Quota, base *forkBase, first layerRecord) error {
	if _, err := kt.Get([]byte(headerKey)); err == nil {
		return errs.New(errs.VaultExists, "vault create", "file already holds a vault")
	}
	hb, _ := json.Marshal(hdr)
	if err := kt.Put([]byte(headerKey), hb); err != nil {
		return err
	}
	qb, _ := json.Marshal(q)
	puts := map[string][]byte{
		metaTop:       u64(nil, 1),
		metaTopo:      u64(nil, 1),
		metaNextIno:   u64(nil, nextIno),
		metaNextLayer: u64(nil, nextLayer),
		metaQuota:     qb,
	}
	if base != nil {
		puts[metaBase], _ = json.Marshal(base)
	}
	for k, v := range puts {
		if err := kt.Put(metaKey(k), v); err != nil {
			return err
		}
	}
	return kt.Put(layerKey(1), encodeLayer(&first))
}

// ErrIncomplete marks a vault file whose creation never finished: the
// engine's file exists but holds nothing. No data can be in it, so the
// registry may remove it.
var ErrIncomplete = errors.New("the vault's creation did not finish: the file holds no vault")

// Open opens the vault held by eng, checking its header. opener is used
// only if the vault is a fork; it may be nil otherwise.
func Open(eng kv.Engine, opener Opener) (*Vault, error) {
	v := &Vault{eng: eng, opener: opener, now: time.Now}
	err := eng.View(func(kt kv.Tx) error {
		b, err := kt.Get([]byte(headerKey))
		if errors.Is(err, kv.ErrNotFound) {
			empty := true
			// Chunks of a shared space are other vaults' too.
			ranges := [][2][]byte{{nil, nil}}
			if sharesChunks(eng) {
				ranges = [][2][]byte{{nil, ChunkPrefix}, {kv.PrefixEnd(ChunkPrefix), nil}}
			}
			for _, r := range ranges {
				if err := kt.Scan(r[0], r[1], func(_, _ []byte) (bool, error) { empty = false; return false, nil }); err != nil {
					return err
				}
			}
			if empty {
				return &errs.Error{Kind: errs.CorruptVault, Op: "vault open", Err: ErrIncomplete,
					Hint: "delete it and create the vault again"}
			}
			return &errs.Error{Kind: errs.CorruptVault, Op: "vault open",
				Err: errors.New("not an avfs vault: the file has no avfs header"), Hint: "the file belongs to another program or was damaged"}
		}
		if err != nil {
			return err
		}
		return checkHeader(b, &v.hdr)
	})
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, storageErr("vault open", "", err)
	}
	return v, nil
}

func checkHeader(b []byte, h *Header) error {
	corrupt := func(msg string) error {
		return &errs.Error{Kind: errs.CorruptVault, Op: "vault open", Err: errors.New(msg)}
	}
	if err := json.Unmarshal(b, h); err != nil || h.Magic != Magic {
		return corrupt("not an avfs vault: bad header")
	}
	if h.FormatVersion > FormatVersion || h.FormatVersion < 1 {
		return &errs.Error{Kind: errs.UnsupportedFormat, Op: "vault open",
			Err:  fmt.Errorf("vault format version %d; this avfs reads version %d", h.FormatVersion, FormatVersion),
			Hint: "upgrade avfs to open this vault"}
	}
	for _, f := range h.Features {
		if !slices.Contains(knownFeatures, f) {
			return &errs.Error{Kind: errs.UnsupportedFormat, Op: "vault open",
				Err: fmt.Errorf("vault requires feature %q that this avfs does not know", f), Hint: "upgrade avfs to open this vault"}
		}
	}
	if h.ChunkSize != ChunkSize {
		return corrupt(fmt.Sprintf("chunk size %d is not %d", h.ChunkSize, ChunkSize))
	}
	return nil
}

// birthOf derives the birth stamp of a vault's inodes from its id.
func birthOf(vaultID string) uint64 {
	b, _ := hex.DecodeString(vaultID)
	var v uint64
	for _, c := range b[:min(8, len(b))] {
		v = v<<8 | uint64(c)
	}
	return v
}

// Header returns the vault's format header.
func (v *Vault) Header() Header { return v.hdr }

// Name is the name the vault was created with.
func (v *Vault) Name() string { return v.hdr.Name }

// ID is the vault's unique id.
func (v *Vault) ID() string { return v.hdr.VaultID }

// Engine is the storage engine holding the vault.
func (v *Vault) Engine() kv.Engine { return v.eng }

// SetWriteGuard installs a check run before every change of the working
// state's content (Update, RestoreCheckpoint). Operations that keep the
// working state as it is — saving a checkpoint, forking, compaction, gc —
// are not guarded: they are safe beside the vault's single writer, whose
// transactions notice the new layer topology. The registry uses it to keep
// a vault mounted read-write from being written by anyone but its mount.
func (v *Vault) SetWriteGuard(g func() error) { v.guard = g }

// SetLayersFreed has fn told of the layers of this file that compaction
// or garbage collection deleted, once the transaction that deleted them
// committed: what is keyed by a layer outside the vault (the overlay
// transport's materialized layers) is dropped with it.
func (v *Vault) SetLayersFreed(fn func(layers []uint64)) { v.freed = fn }

func (v *Vault) layersFreed(layers ...uint64) {
	if v.freed != nil && len(layers) > 0 {
		v.freed(layers)
	}
}

// CheckWriter asks the write guard now whether the working state may be
// changed, as the first change would.
func (v *Vault) CheckWriter() error { return v.checkGuard() }

func (v *Vault) checkGuard() error {
	if v.guard == nil {
		return nil
	}
	return v.guard()
}

// SetClock replaces the clock used for timestamps (tests).
func (v *Vault) SetClock(now func() time.Time) { v.now = now }

// AtClose has Close call fn before it closes the engine: the registry
// gives a writer's lease back there, while the engine still reaches its
// store.
func (v *Vault) AtClose(fn func() error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.atClose = append(v.atClose, fn)
}

// Close releases the engine and any parent vaults a fork opened.
func (v *Vault) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	var err error
	for _, fn := range v.atClose {
		if ferr := fn(); err == nil {
			err = ferr
		}
	}
	if cerr := v.eng.Close(); err == nil {
		err = cerr
	}
	for _, p := range v.parents {
		if cerr := p.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// getU64 reads a u64 metadata value.
func getU64(kt kv.Tx, name string) (uint64, error) {
	b, err := kt.Get(metaKey(name))
	if err != nil {
		return 0, corruptf("missing metadata %q: %v", name, err)
	}
	if len(b) != 8 {
		return 0, corruptf("metadata %q is malformed", name)
	}
	return binary.BigEndian.Uint64(b), nil
}

func getLayer(kt kv.Tx, id uint64) (*layerRecord, error) {
	b, err := kt.Get(layerKey(id))
	if err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return nil, corruptf("layer %d is missing", id)
		}
		return nil, err
	}
	l, err := decodeLayer(b)
	if err != nil {
		return nil, corruptf("layer %d: %v", id, err)
	}
	return l, nil
}

// ownLayers walks the parent links from layer id to the bottom of this file.
func ownLayers(kt kv.Tx, id uint64) (map[uint64]bool, error) {
	set := map[uint64]bool{}
	for id != 0 {
		if set[id] {
			return nil, corruptf("layer %d is its own ancestor", id)
		}
		set[id] = true
		l, err := getLayer(kt, id)
		if err != nil {
			return nil, err
		}
		id = l.Parent
	}
	return set, nil
}

// currentChain returns the chain of the working state, rebuilt only when
// the topology counter moved.
func (v *Vault) currentChain(kt kv.Tx) (*chain, error) {
	topo, err := getU64(kt, metaTopo)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	c := v.cached
	v.mu.Unlock()
	if c != nil && c.topo == topo {
		return c, nil
	}
	top, err := getU64(kt, metaTop)
	if err != nil {
		return nil, err
	}
	c, err = v.chainAt(kt, top)
	if err != nil {
		return nil, err
	}
	c.topo = topo
	v.mu.Lock()
	v.cached = c
	v.mu.Unlock()
	return c, nil
}

// chainAt builds the chain of the state seen from layer id of this file.
func (v *Vault) chainAt(kt kv.Tx, id uint64) (*chain, error) {
	own, err := ownLayers(kt, id)
	if err != nil {
		return nil, err
	}
	bases, err := v.baseSegs(kt)
	if err != nil {
		return nil, err
	}
	segs := append([]seg{{v: v, layers: own}}, bases...)
	return &chain{top: id, segs: segs}, nil
}

// baseSegs returns the parent files' part of this vault's chains. The
// layers below a fork's pin are frozen and pinned, so the answer never
// changes once loaded.
func (v *Vault) baseSegs(kt kv.Tx) ([]seg, error) {
	v.mu.Lock()
	if v.bases != nil {
		b := v.bases
		v.mu.Unlock()
		return b, nil
	}
	v.mu.Unlock()
	b, err := kt.Get(metaKey(metaBase))
	if errors.Is(err, kv.ErrNotFound) {
		v.mu.Lock()
		v.bases = []seg{}
		v.mu.Unlock()
		return []seg{}, nil
	}
	if err != nil {
		return nil, err
	}
	var base forkBase
	if err := json.Unmarshal(b, &base); err != nil {
		return nil, corruptf("fork base record: %v", err)
	}
	if v.opener == nil {
		return nil, &errs.Error{Kind: errs.StorageError, Op: "vault open", Vault: v.Name(),
			Err: fmt.Errorf("vault is a fork of %q but no way to open it was given", base.Name)}
	}
	parent, err := v.opener(base.Name, base.VaultID)
	if err != nil {
		return nil, err
	}
	var segs []seg
	err = parent.eng.View(func(pkt kv.Tx) error {
		c, err := parent.chainAt(pkt, base.Layer)
		if err != nil {
			return err
		}
		segs = c.segs
		return nil
	})
	if err != nil {
		parent.Close()
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.bases != nil { // another goroutine won the race
		parent.Close()
		return v.bases, nil
	}
	v.parents = append(v.parents, parent)
	v.bases = segs
	return segs, nil
}

func corruptf(format string, args ...any) error {
	return &errs.Error{Kind: errs.CorruptVault, Err: fmt.Errorf(format, args...)}
}

// storageErr wraps an engine failure in a typed error, keeping typed ones.
func storageErr(op, vault string, err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		if e.Op == "" {
			e.Op = op
		}
		if e.Vault == "" {
			e.Vault = vault
		}
		return err
	}
	kind := errs.StorageError
	switch {
	case errors.Is(err, kv.ErrBusy):
		kind = errs.VaultLocked
	case errors.Is(err, kv.ErrCorrupt), errors.Is(err, kv.ErrForeign):
		kind = errs.CorruptVault
	}
	return &errs.Error{Kind: kind, Op: op, Vault: vault, Err: err}
}
