package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// LeaseTTLEnv, a Go duration, sets how long a writer's lease on a vault
// in a store outlives its holder's last renewal: how long another host
// waits after the holder died (the engine's default, 10 s, when unset).
const LeaseTTLEnv = "AVFS_LEASE_TTL"

// writer is the lease of one open vault whose engine is shared by hosts
// (kv.Leaser): taken before the first change of the working state (or at
// open, by OpenFor), renewed while the vault is open, given back when it
// is closed. A vault on a file engine has none: the file's own locks and
// the home's mount lock keep it to one writer.
type writer struct {
	name string
	eng  kv.Leaser
	ttl  time.Duration

	mu    sync.Mutex
	lease kv.Lease
}

// check takes the lease when it is not held yet. It fails with VaultLocked
// naming the holder's host and pid while another holder has it, and when
// this one lost it.
func (w *writer) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease != nil {
		select {
		case <-w.lease.Lost():
			return &errs.Error{Kind: errs.VaultLocked, Op: "write", Vault: w.name,
				Err:  errors.New("this process lost the vault's writer lease to another host (it could not renew it in time)"),
				Hint: "open the vault again"}
		default:
			return nil
		}
	}
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := w.eng.LeaseWriter(ctx, host, os.Getpid(), w.ttl)
	if err != nil {
		if errors.Is(err, kv.ErrBusy) {
			return &errs.Error{Kind: errs.VaultLocked, Op: "write", Vault: w.name,
				Err:  fmt.Errorf("another writer holds vault %q: %w", w.name, err),
				Hint: "wait for it to finish; a writer that died gives the vault up when its lease expires"}
		}
		return &errs.Error{Kind: errs.KindOf(wrapEngineErr(err)), Op: "write lease", Vault: w.name, Err: err}
	}
	w.lease = l
	return nil
}

func (w *writer) release() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease == nil {
		return nil
	}
	err := w.lease.Release()
	w.lease = nil
	return err
}

// leaseFor gives v, of vault name, a writer lease when its engine is
// shared by hosts, and returns it (nil otherwise).
func (h *Home) leaseFor(name string, v *vfs.Vault) *writer {
	l, ok := v.Engine().(kv.Leaser)
	if !ok {
		return nil
	}
	w := &writer{name: name, eng: l, ttl: h.leaseTTL}
	v.AtClose(w.release)
	return w
}
