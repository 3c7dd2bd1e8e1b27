package vfs

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/kv"
)

// metaSettings holds the vault's Settings (JSON), once one was set.
const metaSettings = "settings"

// DefaultRunCheckpoints is how many proxy runs' checkpoints a vault keeps
// when its settings do not say: enough to undo a working session, few
// enough that a vault an agent runs in all day does not grow without end.
const DefaultRunCheckpoints = 50

// Settings are a vault's own options (`avfs vault set`). Fields may be
// added; a vault without a record has the defaults.
type Settings struct {
	// RunCheckpoints is how many checkpoints of proxy runs the vault
	// keeps: after each run the oldest beyond it are pruned
	// (PruneCheckpoints), and those runs can no longer be undone. 0 keeps
	// them all.
	RunCheckpoints int `json:"run_checkpoints"`
}

// DefaultSettings are the settings of a vault that set none.
func DefaultSettings() Settings { return Settings{RunCheckpoints: DefaultRunCheckpoints} }

// Check refuses settings no vault can have.
func (s Settings) Check() error {
	if s.RunCheckpoints < 0 {
		return &errs.Error{Kind: errs.InvalidInput, Op: "vault set", Err: fmt.Errorf("run-checkpoints must be 0 (keep all) or positive, not %d", s.RunCheckpoints)}
	}
	return nil
}

// Settings returns the vault's settings, the defaults where none were set.
func (v *Vault) Settings() (Settings, error) {
	s := DefaultSettings()
	err := v.eng.View(func(kt kv.Tx) error {
		b, err := kt.Get(metaKey(metaSettings))
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return corruptf("settings record: %v", err)
		}
		return nil
	})
	return s, storageErr("vault settings", v.Name(), err)
}

// SetSettings records s as the vault's settings. Settings that fail Check
// are InvalidInput and change nothing.
func (v *Vault) SetSettings(s Settings) error {
	if err := s.Check(); err != nil {
		return err
	}
	b, _ := json.Marshal(s)
	err := v.eng.Update(func(kt kv.Tx) error { return kt.Put(metaKey(metaSettings), b) })
	return storageErr("vault set", v.Name(), err)
}
