package registry

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// store is the place of a home whose vaults live in a database many homes
// share (AVFS_STORE=postgres://…): each vault an engine store of its own
// (rows of the database's one pairs table, no table per vault), named in
// the store's catalog, a kv store of the same database:
//
//	"v" name    JSON storeEntry: the vault's store and id
//
// A vault gets its name only once it is complete: create fills a store of
// a fresh random name (v + 24 hex digits), then adds the name in one
// serializable transaction that fails when another host took it
// meanwhile. No creation lock spans hosts, and no name ever holds a
// half-made vault; a creator that dies leaves at most a store no name
// points to, which the server dates, and sweep drops once it is old. A
// fork is three write transactions: the parent's pin, the fork's first
// keys (its store's row with them), and its name.
// (Format-1 catalogs also held "p" marks of such tables; sweep deletes
// what is left of them.)
type store struct {
	addr   string // as the user gave it, password included: never printed
	engine string
}

// catalogTable is the kv table of a store's catalog.
const catalogTable = "avfs_registry"

// chunks is the space where every vault of a store keeps its chunks
// (vfs's shared chunk space): identical content is stored once for the
// fleet, and a fork copies nothing.
var chunks = engines.Shared{Prefix: vfs.ChunkPrefix, Space: "avfs_chunks"}

type storeEntry struct {
	Table   string `json:"table"`
	VaultID string `json:"vault_id"`
}

func catalogKey(name string) []byte { return append([]byte{'v'}, name...) }

// vaultStoreRE matches the names create gives the stores of vaults.
var vaultStoreRE = regexp.MustCompile(`^v[0-9a-f]{24}$`)

// legacyMark is the catalog's range of format-1 marks of unnamed tables.
var legacyMark = [2][]byte{{'p'}, {'q'}}

// storeErr is err of the store, typed, naming the store without its password.
func (s *store) err(op, name string, err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return &errs.Error{Kind: errs.KindOf(wrapEngineErr(err)), Op: op, Vault: name, Path: engines.Redact(s.addr), Err: err,
		Hint: storeHint(err)}
}

func storeHint(err error) string {
	switch {
	case errors.Is(err, kv.ErrUnavailable):
		return "check AVFS_STORE (or --store, or store in config.toml): the server, the database and the credentials"
	case errors.Is(err, kv.ErrForeign):
		return "the database belongs to another program: give avfs a database of its own"
	case errors.Is(err, kv.ErrNewerFormat):
		return "a newer avfs made this store: upgrade avfs"
	}
	return ""
}

// catalog opens the store's catalog; when create is false and the store
// has none yet, it returns nil and no error: a store without vaults.
func (s *store) catalog(create bool) (kv.Engine, error) {
	eng, err := engines.OpenAt(s.addr, catalogTable)
	if errors.Is(err, fs.ErrNotExist) && create {
		eng, err = engines.CreateAt(s.addr, catalogTable)
		if errors.Is(err, fs.ErrExist) { // another home made it meanwhile
			eng, err = engines.OpenAt(s.addr, catalogTable)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return eng, err
}

// lookup returns the catalog entry of vault name; its error wraps
// fs.ErrNotExist when there is none.
func (s *store) lookup(name string) (storeEntry, error) {
	var e storeEntry
	cat, err := s.catalog(false)
	if err != nil {
		return e, err
	}
	if cat == nil {
		return e, fmt.Errorf("no vault %q in the store: %w", name, fs.ErrNotExist)
	}
	defer cat.Close()
	err = cat.View(func(tx kv.Tx) error {
		b, err := tx.Get(catalogKey(name))
		if errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("no vault %q in the store: %w", name, fs.ErrNotExist)
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Table == "" {
			return fmt.Errorf("the store's catalog entry of vault %q is damaged: %w", name, kv.ErrCorrupt)
		}
		return nil
	})
	return e, err
}

func (s *store) where(name string) string {
	if e, err := s.lookup(name); err == nil {
		return engines.Redact(s.addr) + "#" + e.Table
	}
	return engines.Redact(s.addr)
}

func (s *store) defaultEngine() string { return s.engine }

func (s *store) engines() []string { return []string{s.engine} }

func (s *store) caps(string) (kv.Capabilities, error) {
	c, _ := engines.Caps(s.engine)
	return c, nil
}

func (s *store) exists(name string) bool {
	_, err := s.lookup(name)
	return err == nil
}

func (s *store) open(name string) (kv.Engine, error) {
	e, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return engines.OpenAt(s.addr, e.Table, chunks)
}

func (s *store) create(name, engine string, fill func(kv.Engine) (*vfs.Vault, error)) (*vfs.Vault, error) {
	cat, err := s.catalog(true)
	if err != nil {
		return nil, s.err("vault create", name, err)
	}
	defer cat.Close()
	taken := false
	err = cat.View(func(tx kv.Tx) error {
		have, err := kv.Has(tx, catalogKey(name))
		taken = have
		return err
	})
	if err != nil {
		return nil, s.err("vault create", name, err)
	}
	if taken {
		return nil, vaultExists(name)
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	table := "v" + hex.EncodeToString(id[:])
	// The new store is written, and dated by the server, with fill's
	// first commit: a creator killed before it names it leaves nothing
	// or a store sweep finds by its name and age.
	eng, err := engines.CreateUniqueAt(s.addr, table, chunks)
	if err != nil {
		return nil, s.err("vault create", name, err)
	}
	v, err := fill(eng)
	if err != nil {
		eng.Close()
		_ = engines.RemoveAt(s.addr, table, chunks)
		return nil, err
	}
	entry, _ := json.Marshal(storeEntry{Table: table, VaultID: v.ID()})
	err = cat.Update(func(tx kv.Tx) error {
		_, err := tx.Get(catalogKey(name))
		switch {
		case err == nil:
			taken = true
			return nil
		case !errors.Is(err, kv.ErrNotFound):
			return err
		}
		return tx.Put(catalogKey(name), entry)
	})
	if err != nil || taken {
		v.Close()
		_ = engines.RemoveAt(s.addr, table, chunks)
		if err != nil {
			return nil, s.err("vault create", name, err)
		}
		return nil, vaultExists(name)
	}
	return v, nil
}

// remove takes the name out of the catalog first, so no home opens the
// vault's store while it is dropped; a crash between leaves an unnamed
// store, which sweep drops.
func (s *store) remove(name string) error {
	cat, err := s.catalog(false)
	if err != nil || cat == nil {
		return err
	}
	defer cat.Close()
	var e storeEntry
	err = cat.Update(func(tx kv.Tx) error {
		b, err := tx.Get(catalogKey(name))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		_ = json.Unmarshal(b, &e)
		return tx.Delete(catalogKey(name))
	})
	if err != nil || e.Table == "" {
		return err
	}
	return engines.RemoveAt(s.addr, e.Table, chunks)
}

// UnnamedAge is how long a vault store no name points to is left before
// sweep drops it: longer than any creation takes.
const UnnamedAge = time.Hour

// sweep drops the vault stores no name points to that were created age
// or longer ago: those of creators killed before they named them, and of
// deletes killed before they dropped them. It returns how many it
// dropped.
func (s *store) sweep(age time.Duration) (int, error) {
	cat, err := s.catalog(false)
	if err != nil || cat == nil {
		return 0, err
	}
	defer cat.Close()
	stored, err := engines.ListAt(s.addr)
	if err != nil {
		return 0, err
	}
	// The names are read after the list: a store named meanwhile is seen
	// named.
	named := map[string]bool{}
	var marks [][]byte
	err = cat.View(func(tx kv.Tx) error {
		if err := kv.ScanKeys(tx, legacyMark[0], legacyMark[1], func(k []byte) (bool, error) {
			marks = append(marks, bytes.Clone(k))
			return true, nil
		}); err != nil {
			return err
		}
		return tx.Scan([]byte{'v'}, []byte{'w'}, func(_, v []byte) (bool, error) {
			var e storeEntry
			if json.Unmarshal(v, &e) == nil {
				named[e.Table] = true
			}
			return true, nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range stored {
		if !vaultStoreRE.MatchString(st.Name) || named[st.Name] || st.Age < age {
			continue
		}
		if err := engines.RemoveAt(s.addr, st.Name, chunks); err != nil {
			return n, err
		}
		n++
	}
	if len(marks) == 0 {
		return n, nil
	}
	err = cat.Update(func(tx kv.Tx) error {
		for _, k := range marks {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

func (s *store) names() ([]string, error) {
	cat, err := s.catalog(false)
	if err != nil {
		return nil, s.err("vault list", "", err)
	}
	if cat == nil {
		return nil, nil
	}
	defer cat.Close()
	var out []string
	err = cat.View(func(tx kv.Tx) error {
		return kv.ScanKeys(tx, []byte{'v'}, []byte{'w'}, func(k []byte) (bool, error) {
			if name := string(k[1:]); CheckName(name) == nil {
				out = append(out, name)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, s.err("vault list", "", err)
	}
	return out, nil
}

// StoreTable opens the kv table name of the home's store, creating it
// when create is set, for what the homes of a store share beside their
// vaults (the proxy's runs and approvals). A home without a store has
// none: nil and no error. A table not there yet without create is nil
// and no error too. The caller closes the engine.
func (h *Home) StoreTable(name string, create bool) (kv.Engine, error) {
	s, ok := h.place.(*store)
	if !ok {
		return nil, nil
	}
	eng, err := engines.OpenAt(s.addr, name)
	if errors.Is(err, fs.ErrNotExist) && create {
		eng, err = engines.CreateAt(s.addr, name)
		if errors.Is(err, fs.ErrExist) { // another home made it meanwhile
			eng, err = engines.OpenAt(s.addr, name)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, s.err("store", "", err)
	}
	return eng, nil
}

// Shared reports whether the home's vaults are in a store many homes share.
func (h *Home) Shared() bool {
	_, ok := h.place.(*store)
	return ok
}
