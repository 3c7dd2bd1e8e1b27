package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// The leases of a store: one row per table with a writer. Expiry is the
// server's clock, so hosts whose clocks disagree still agree on it.
const leaseTable = "avfs_leases"

const createLeases = `CREATE TABLE IF NOT EXISTS ` + leaseTable + ` (
	store text PRIMARY KEY, host text NOT NULL, pid integer NOT NULL,
	token text NOT NULL, expires timestamptz NOT NULL)`

// DefaultLeaseTTL is how long a lease outlives its holder's last
// heartbeat: the time another host waits after a holder dies.
const DefaultLeaseTTL = 10 * time.Second

// LeaseHeld is the error of a Lease another holder has. It wraps
// kv.ErrBusy (VaultLocked in the JSON contract).
type LeaseHeld struct {
	Store   string
	Host    string
	PID     int
	Expires time.Time // unless renewed
}

func (e *LeaseHeld) Error() string {
	return fmt.Sprintf("%s: held by pid %d on host %s (expires %s unless renewed)",
		e.Store, e.PID, e.Host, e.Expires.UTC().Format(time.RFC3339))
}

func (e *LeaseHeld) Unwrap() error { return kv.ErrBusy }

// Lease is one writer's claim on a store table, renewed by a heartbeat
// until Release. Readers never ask for one, so they never wait.
type Lease struct {
	db    *DB
	token string
	ttl   time.Duration
	stop  chan struct{}
	lost  chan struct{}
	done  sync.WaitGroup
	once  sync.Once
}

// Lease claims the engine's table for host and pid, for ttl (renewed at a
// third of it; DefaultLeaseTTL when zero). It fails with *LeaseHeld when
// another holder's lease has not expired. A holder that dies stops
// renewing, and its lease can be taken ttl after its last renewal.
func (db *DB) Lease(ctx context.Context, host string, pid int, ttl time.Duration) (*Lease, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.running.Done()
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	l := &Lease{db: db, token: hex.EncodeToString(b[:]), ttl: ttl, stop: make(chan struct{}), lost: make(chan struct{})}
	var got string
	err := db.pool.QueryRow(ctx, `INSERT INTO `+leaseTable+` AS l VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')
		ON CONFLICT (store) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, token = EXCLUDED.token, expires = EXCLUDED.expires
		WHERE l.expires < now()
		RETURNING token`, db.opts.Table, host, pid, l.token, ttl.Milliseconds()).Scan(&got)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, db.wrap("lease", err)
	}
	if got != l.token {
		held := &LeaseHeld{Store: db.Path()}
		if err := db.pool.QueryRow(ctx, `SELECT host, pid, expires FROM `+leaseTable+` WHERE store = $1`,
			db.opts.Table).Scan(&held.Host, &held.PID, &held.Expires); err != nil {
			return nil, db.wrap("lease", err)
		}
		return nil, held
	}
	db.mu.Lock()
	if db.leases == nil {
		db.leases = map[*Lease]bool{}
	}
	db.leases[l] = true
	db.mu.Unlock()
	l.done.Add(1)
	go l.heartbeat()
	return l, nil
}

var _ kv.Leaser = (*DB)(nil)

// LeaseWriter implements kv.Leaser with Lease.
func (db *DB) LeaseWriter(ctx context.Context, host string, pid int, ttl time.Duration) (kv.Lease, error) {
	l, err := db.Lease(ctx, host, pid, ttl)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Lease) heartbeat() {
	defer l.done.Done()
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		tag, err := l.db.pool.Exec(ctx, `UPDATE `+leaseTable+` SET expires = now() + $1 * interval '1 millisecond'
			WHERE store = $2 AND token = $3`, l.ttl.Milliseconds(), l.db.opts.Table, l.token)
		cancel()
		if err == nil && tag.RowsAffected() == 0 {
			// Taken over after it expired: this holder must stop writing.
			close(l.lost)
			return
		}
		// A failed renewal (the server away) is tried again; the lease
		// is lost only once another holder has it.
	}
}

// Lost is closed when another holder took the lease after it expired
// (this one failed to renew it in time).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release stops the heartbeat and gives the lease up at once.
func (l *Lease) Release() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		l.done.Wait()
		l.db.mu.Lock()
		delete(l.db.leases, l)
		l.db.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), l.db.opts.ConnTimeout)
		defer cancel()
		_, err = l.db.pool.Exec(ctx, `DELETE FROM `+leaseTable+` WHERE store = $1 AND token = $2`, l.db.opts.Table, l.token)
		err = l.db.wrap("release lease", err)
	})
	return err
}
