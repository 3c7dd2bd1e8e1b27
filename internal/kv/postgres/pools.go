package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pools of closed engines, kept warm for the next engine on the same
// address. Connecting costs a handshake and authentication (most of the
// 25 ms a fork took over a Unix socket, when every engine dialled its
// own), and the registry opens several engines of one store per command
// (the catalog, a vault, its parents, a fork). A pool is never shared by
// two open engines: a fork's transaction holds a connection of its own
// engine while it reads its parents' through theirs, and engines drawing
// on one bounded pool could each hold one and wait for another for ever.
const maxParked = 4

var parked = struct {
	sync.Mutex
	pools map[string][]*pgxpool.Pool
}{pools: map[string][]*pgxpool.Pool{}}

// poolKey is what two engines' pools must agree on to be swapped: the
// address and the settings their connections carry.
func poolKey(dsn string, o Options) string {
	return fmt.Sprintf("%d\x00%d\x00%d\x00%s", o.ConnTimeout, o.MaxConns, o.LockTimeout, dsn)
}

// takePool returns a parked pool of key, or makes a new one.
func takePool(ctx context.Context, key string, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	parked.Lock()
	if ps := parked.pools[key]; len(ps) > 0 {
		p := ps[len(ps)-1]
		parked.pools[key] = ps[:len(ps)-1]
		parked.Unlock()
		return p, nil
	}
	parked.Unlock()
	return pgxpool.NewWithConfig(ctx, cfg)
}

// parkPool keeps p for the next engine of key, or closes it when enough
// are kept.
func parkPool(key string, p *pgxpool.Pool) {
	parked.Lock()
	if len(parked.pools[key]) < maxParked {
		parked.pools[key] = append(parked.pools[key], p)
		parked.Unlock()
		return
	}
	parked.Unlock()
	p.Close()
}
