package vfs

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/agentvfs/agentvfs/internal/kv"
)

// metaOrigin holds the vault's Origin (JSON), when it has one.
const metaOrigin = "origin"

// Origin is where a vault's content came from: the host directory it was
// imported from and the checkpoint holding that import. `avfs apply`
// writes the changes made since that checkpoint back into the directory.
type Origin struct {
	HostDir    string    `json:"host_dir"`
	Checkpoint string    `json:"checkpoint"`
	RecordedAt time.Time `json:"recorded_at"`
}

// SetOrigin records o as the vault's origin.
func (v *Vault) SetOrigin(o Origin) error {
	b, _ := json.Marshal(o)
	err := v.eng.Update(func(kt kv.Tx) error { return kt.Put(metaKey(metaOrigin), b) })
	return storageErr("vault origin", v.Name(), err)
}

// Origin returns the vault's recorded origin, or nil.
func (v *Vault) Origin() (*Origin, error) {
	var o *Origin
	err := v.eng.View(func(kt kv.Tx) error {
		b, err := kt.Get(metaKey(metaOrigin))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		o = &Origin{}
		if err := json.Unmarshal(b, o); err != nil {
			return corruptf("origin record: %v", err)
		}
		return nil
	})
	return o, storageErr("vault info", v.Name(), err)
}
