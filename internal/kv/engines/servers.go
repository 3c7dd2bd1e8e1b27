package engines

import (
	"strings"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/postgres"
)

// server is an engine whose store lives on a database server, named by an
// address (a DSN) instead of a path. One address holds many stores, each
// named (a table of its own once; rows of one table now).
type server struct {
	name    string
	schemes []string
	caps    kv.Capabilities
	create  func(addr, table string, unique bool, sh *Shared) (kv.Engine, error)
	open    func(addr, table string, sh *Shared) (kv.Engine, error)
	remove  func(addr, table string, sh *Shared) error
	list    func(addr string) ([]Stored, error)
	redact  func(addr string) string
}

// servers lists the server engines. Adding one means adding it here.
var servers = []server{
	{
		name:    postgres.Name,
		schemes: []string{"postgres://", "postgresql://"},
		caps:    postgres.Caps,
		create: func(a, t string, unique bool, sh *Shared) (kv.Engine, error) {
			return postgres.Create(a, &postgres.Options{Table: t, Shared: pgShared(sh), Unique: unique})
		},
		open: func(a, t string, sh *Shared) (kv.Engine, error) {
			return postgres.Open(a, &postgres.Options{Table: t, Shared: pgShared(sh)})
		},
		remove: func(a, t string, sh *Shared) error {
			return postgres.Drop(a, &postgres.Options{Table: t, Shared: pgShared(sh)})
		},
		list: func(a string) ([]Stored, error) {
			got, err := postgres.List(a, nil)
			out := make([]Stored, len(got))
			for i, s := range got {
				out[i] = Stored{Name: s.Name, Age: s.Age}
			}
			return out, err
		},
		redact: postgres.Redact,
	},
}

// Shared asks a server engine to keep the keys under Prefix in one space
// that every store at the address naming Space shares (the vaults of a
// store share their chunks so); kv.Capabilities.SharedPrefix says so.
type Shared struct {
	Prefix []byte
	Space  string
}

func pgShared(sh *Shared) *postgres.Shared {
	if sh == nil {
		return nil
	}
	return &postgres.Shared{Prefix: sh.Prefix, Table: sh.Space}
}

func first(sh []Shared) *Shared {
	if len(sh) == 0 {
		return nil
	}
	return &sh[0]
}

func lookupAddress(addr string) (server, bool) {
	for _, s := range servers {
		for _, scheme := range s.schemes {
			if strings.HasPrefix(addr, scheme) {
				return s, true
			}
		}
	}
	return server{}, false
}

// IsAddress reports whether s names a store on a server (a postgres://
// URL) rather than a file.
func IsAddress(s string) bool {
	_, ok := lookupAddress(s)
	return ok
}

// EngineAt names the engine of the stores at addr, and false when addr
// is not the address of a known server engine.
func EngineAt(addr string) (string, bool) {
	s, ok := lookupAddress(addr)
	return s.name, ok
}

// Redact is addr without its password, as output and messages name it.
func Redact(addr string) string {
	s, ok := lookupAddress(addr)
	if !ok {
		return errNotAddress(addr).scheme() + "://…"
	}
	return s.redact(addr)
}

// CreateAt makes store table at the server address addr. Its errors are
// the engine's: os.ErrExist for a table that exists, kv.ErrUnavailable
// for a server that cannot be reached, kv.ErrForeign for a database of
// another program, kv.ErrNewerFormat for a newer avfs's. Server engines
// are not shared per process as files are: each call has its own pool.
// With shared (at most one), the store keeps a range of keys in a space
// other stores share.
func CreateAt(addr, table string, shared ...Shared) (kv.Engine, error) {
	s, ok := lookupAddress(addr)
	if !ok {
		return nil, errNotAddress(addr)
	}
	return s.create(addr, table, false, first(shared))
}

// CreateUniqueAt is CreateAt for a table name no other creator can
// choose (a random one): the engine may then make the store with its
// first commit rather than a commit of its own, and other engines open
// it only from then on.
func CreateUniqueAt(addr, table string, shared ...Shared) (kv.Engine, error) {
	s, ok := lookupAddress(addr)
	if !ok {
		return nil, errNotAddress(addr)
	}
	return s.create(addr, table, true, first(shared))
}

// OpenAt opens store table at addr, with CreateAt's errors and
// os.ErrNotExist for a table that is not there. shared is CreateAt's: a
// store must be opened with the shared range it was made with.
func OpenAt(addr, table string, shared ...Shared) (kv.Engine, error) {
	s, ok := lookupAddress(addr)
	if !ok {
		return nil, errNotAddress(addr)
	}
	return s.open(addr, table, first(shared))
}

// RemoveAt removes store table at addr; a table that is not there is not
// an error. Its other errors are OpenAt's. shared is CreateAt's: the
// removal waits for the writers of the store, who take the shared
// space's writer lock when it has one.
func RemoveAt(addr, table string, shared ...Shared) error {
	s, ok := lookupAddress(addr)
	if !ok {
		return errNotAddress(addr)
	}
	return s.remove(addr, table, first(shared))
}

// Stored is one store at an address, as ListAt sees it.
type Stored struct {
	Name string
	Age  time.Duration // since it was created, by the server's clock
}

// ListAt lists the stores at addr, by name; an address without avfs's
// tables has none. Its errors are OpenAt's.
func ListAt(addr string) ([]Stored, error) {
	s, ok := lookupAddress(addr)
	if !ok {
		return nil, errNotAddress(addr)
	}
	return s.list(addr)
}

type errNotAddress string

func (e errNotAddress) Error() string {
	// An address that is not one of ours may still hold a password: name
	// its scheme only.
	return "kv: " + e.scheme() + ": not the address of a known server engine (postgres://…)"
}

func (e errNotAddress) scheme() string {
	scheme, _, _ := strings.Cut(string(e), ":")
	return scheme
}
