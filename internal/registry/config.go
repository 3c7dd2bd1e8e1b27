package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv/engines"
)

// ConfigFile is the home's settings file, $AVFS_HOME/config.toml:
//
//	store = "postgres://avfs@db.internal/avfs"   # vaults in a shared store
const ConfigFile = "config.toml"

// StoreEnv names the store of the home's vaults, before config.toml.
const StoreEnv = "AVFS_STORE"

// Options open a home.
type Options struct {
	// Store is the address of a database holding the home's vaults
	// (postgres://…), shared by every home that names it. Empty: the
	// store config.toml names, else a file per vault under vaults/.
	Store string
	// LeaseTTL is how long a writer's lease outlives its holder's last
	// renewal (LeaseTTLEnv); the engine's default when zero.
	LeaseTTL time.Duration
}

type config struct {
	Store string `toml:"store"`
}

// readConfig reads the home's config.toml; a missing file is no settings.
// Keys it does not know are refused, so a misspelt store never silently
// means "files".
func readConfig(dir string) (config, error) {
	var c config
	p := filepath.Join(dir, ConfigFile)
	b, err := readSmall(p)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, &errs.Error{Kind: errs.IoError, Op: "home", Path: p, Err: err}
	}
	md, err := toml.Decode(string(b), &c)
	if err != nil {
		// The decoder quotes the line, which may hold a password.
		var pe toml.ParseError
		msg := "it does not parse as TOML"
		if errors.As(err, &pe) {
			msg = fmt.Sprintf("line %d does not parse as TOML", pe.Position.Line)
		}
		return c, &errs.Error{Kind: errs.InvalidInput, Op: "home", Path: p, Err: errors.New(msg)}
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return c, &errs.Error{Kind: errs.InvalidInput, Op: "home", Path: p,
			Err: fmt.Errorf("unknown settings: %s", strings.Join(keys, ", ")), Hint: "the one setting is store = \"postgres://…\""}
	}
	return c, nil
}

// placeOf picks where the home at dir keeps its vaults.
func placeOf(h *Home, opts Options) (place, error) {
	addr := opts.Store
	if addr == "" {
		c, err := readConfig(h.Dir)
		if err != nil {
			return nil, err
		}
		addr = c.Store
	}
	if addr == "" {
		return &files{home: h, dir: filepath.Join(h.Dir, "vaults")}, nil
	}
	name, ok := engines.EngineAt(addr)
	if !ok {
		scheme, _, _ := strings.Cut(addr, ":")
		return nil, &errs.Error{Kind: errs.InvalidInput, Op: "home",
			Err:  fmt.Errorf("store %q… is not the address of a store", scheme),
			Hint: "a store is named postgres://user@host/db (AVFS_STORE, --store or store in config.toml)"}
	}
	h.Store = engines.Redact(addr)
	h.storeAddr = addr
	return &store{addr: addr, engine: name}, nil
}
