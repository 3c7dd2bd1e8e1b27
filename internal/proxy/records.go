package proxy

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/agentvfs/agentvfs/internal/atomicfile"
	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/registry"
)

// records is where a Store keeps runs and the approvals' key and ledger:
// files under the home (fileRecords), or a table of the store the home's
// vaults are in, which every home naming it shares (storeRecords).
type records interface {
	// read returns run id's record; its error wraps os.ErrNotExist when
	// there is none.
	read(id string) ([]byte, error)
	// write stores run id's record, whole and durably.
	write(id string, b []byte) error
	// each calls fn with every run's id and record, in the order of the
	// ids (oldest first); a record that cannot be read is skipped.
	each(fn func(id string, b []byte)) error
	// locked runs fn holding a lock every process on every host naming
	// the same records takes; fn works on the records it is given.
	locked(fn func(records) error) error
	// key is the approval key, made when create is set; without one it
	// is an error of kind ApprovalForged.
	key(create bool) ([]byte, error)
	// markUsed writes approval's use by run in the ledger.
	markUsed(approval, run string) error
	// usedBy is the run that used approval by the ledger ("" if none).
	usedBy(approval string) (string, error)
	// where names run id's record in messages.
	where(id string) string
}

// OpenStore opens the record of proxy runs of h: in the store h's vaults
// are in when it names one (so every host naming it sees the same runs
// and approvals), else under h's directory (NewStore).
func OpenStore(h *registry.Home) (*Store, error) {
	if !h.Shared() {
		return NewStore(h.Dir)
	}
	return &Store{r: &storeRecords{home: h}}, nil
}

type fileRecords struct{ home, dir string }

func (f *fileRecords) path(id string) string  { return filepath.Join(f.dir, id+".json") }
func (f *fileRecords) where(id string) string { return f.path(id) }

func (f *fileRecords) read(id string) ([]byte, error) {
	b, err := os.ReadFile(f.path(id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, &errs.Error{Kind: errs.IoError, Op: "proxy", Err: err}
	}
	return b, err
}

func (f *fileRecords) write(id string, b []byte) error {
	if err := atomicfile.Write(f.path(id), b, 0o600); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy", Err: err}
	}
	return nil
}

func (f *fileRecords) each(fn func(id string, b []byte)) error {
	paths, err := filepath.Glob(filepath.Join(f.dir, "*.json"))
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy", Err: err}
	}
	slices.Sort(paths)
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			fn(strings.TrimSuffix(filepath.Base(p), ".json"), b)
		}
	}
	return nil
}

func (f *fileRecords) locked(fn func(records) error) error {
	lf, err := os.OpenFile(filepath.Join(f.dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy", Err: err}
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return &errs.Error{Kind: errs.IoError, Op: "proxy", Err: err}
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) // see lockVault
	return fn(f)
}

func (f *fileRecords) key(create bool) ([]byte, error) { return approvalKey(f.home, create) }

func (f *fileRecords) markUsed(approval, run string) error { return markUsed(f.home, approval, run) }

func (f *fileRecords) usedBy(approval string) (string, error) { return usedBy(f.home, approval), nil }

// storeRecords keeps the proxy's records in the kv table avfs_proxy of
// the home's store:
//
//	"k"             the approval key, 32 random bytes, made once
//	"r" run id      the run's envelope, JSON
//	"u" approval id the run that used the approval (the used ledger)
//
// Writes are the engine's Update transactions, which queue on the
// table's writer lock (a PostgreSQL advisory lock) and are serializable:
// locked is one such transaction, so it holds across hosts, and a process
// killed in it leaves nothing of it. Whoever can read the table can read
// the key, and whoever can write it can forge approvals: the store's
// credentials guard approvals as they guard the vaults.
type storeRecords struct {
	home *registry.Home
	tx   kv.Tx // inside locked
}

// proxyTable is the kv table of a store's proxy records.
const proxyTable = "avfs_proxy"

const (
	recKey  = 'k'
	recRun  = 'r'
	recUsed = 'u'
)

func recordKey(kind byte, id string) []byte { return append([]byte{kind}, id...) }

func (s *storeRecords) where(id string) string { return s.home.Path("") + "#" + proxyTable + "/" + id }

func storeErr(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return &errs.Error{Kind: errs.StorageError, Op: "proxy", Err: err}
}

// view runs fn in locked's transaction, or a read transaction of its own.
func (s *storeRecords) view(fn func(kv.Tx) error) error {
	if s.tx != nil {
		return fn(s.tx)
	}
	eng, err := s.home.StoreTable(proxyTable, false)
	if err != nil || eng == nil {
		return err // no table yet: fn sees nothing
	}
	defer eng.Close()
	return eng.View(fn)
}

// update runs fn in locked's transaction, or a write transaction of its own.
func (s *storeRecords) update(fn func(kv.Tx) error) error {
	if s.tx != nil {
		return fn(s.tx)
	}
	eng, err := s.home.StoreTable(proxyTable, true)
	if err != nil {
		return err
	}
	defer eng.Close()
	return eng.Update(fn)
}

func (s *storeRecords) read(id string) ([]byte, error) {
	var out []byte
	err := s.view(func(tx kv.Tx) error {
		b, err := tx.Get(recordKey(recRun, id))
		if errors.Is(err, kv.ErrNotFound) {
			return os.ErrNotExist
		}
		out = slices.Clone(b)
		return err
	})
	if err == nil && out == nil {
		return nil, os.ErrNotExist
	}
	return out, err
}

func (s *storeRecords) write(id string, b []byte) error {
	return s.update(func(tx kv.Tx) error { return tx.Put(recordKey(recRun, id), b) })
}

// each reads every run in one transaction.
func (s *storeRecords) each(fn func(id string, b []byte)) error {
	return s.view(func(tx kv.Tx) error {
		return tx.Scan([]byte{recRun}, []byte{recRun + 1}, func(k, v []byte) (bool, error) {
			fn(string(k[1:]), v)
			return true, nil
		})
	})
}

func (s *storeRecords) locked(fn func(records) error) error {
	if s.tx != nil {
		return fn(s)
	}
	eng, err := s.home.StoreTable(proxyTable, true)
	if err != nil {
		return err
	}
	defer eng.Close()
	return eng.Update(func(tx kv.Tx) error { return fn(&storeRecords{home: s.home, tx: tx}) })
}

func (s *storeRecords) key(create bool) ([]byte, error) {
	var key []byte
	get := func(tx kv.Tx) error {
		b, err := tx.Get([]byte{recKey})
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err == nil && len(b) != keySize {
			return &errs.Error{Kind: errs.CorruptVault, Op: "proxy", Path: s.where(""),
				Err: fmt.Errorf("the store's approval key is %d bytes, not %d", len(b), keySize)}
		}
		key = slices.Clone(b)
		return err
	}
	var err error
	if create {
		err = s.update(func(tx kv.Tx) error {
			if err := get(tx); err != nil || key != nil {
				return err
			}
			key = make([]byte, keySize)
			if _, err := rand.Read(key); err != nil {
				return err
			}
			return tx.Put([]byte{recKey}, key)
		})
	} else {
		err = s.view(get)
	}
	if err != nil {
		return nil, storeErr(err)
	}
	if key == nil {
		return nil, &errs.Error{Kind: ApprovalForged, Op: "proxy",
			Err: errors.New("no approval key: nothing was approved with `avfs proxy approve` in this store")}
	}
	return key, nil
}

func (s *storeRecords) markUsed(approval, run string) error {
	err := s.update(func(tx kv.Tx) error { return tx.Put(recordKey(recUsed, approval), []byte(run)) })
	if err != nil {
		return storeErr(err)
	}
	return nil
}

func (s *storeRecords) usedBy(approval string) (string, error) {
	var run string
	err := s.view(func(tx kv.Tx) error {
		b, err := tx.Get(recordKey(recUsed, approval))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		run = string(b)
		return err
	})
	if err != nil {
		return "", storeErr(err)
	}
	return run, nil
}
