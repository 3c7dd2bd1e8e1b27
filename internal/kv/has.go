package kv

import "errors"

// Haser is implemented by transactions that can tell whether a key is
// present without reading its value. SQLite answers from the key index
// alone, where a Get reads every overflow page of the value and copies it
// out: checking that a 64 KiB chunk is already stored cost as much as
// storing it.
type Haser interface {
	// Has reports whether key is present. It follows Get's rules for a
	// transaction that has ended.
	Has(key []byte) (bool, error)
}

// Has reports whether key is present in tx, through Haser when tx
// implements it and through Get otherwise.
func Has(tx Tx, key []byte) (bool, error) {
	if h, ok := tx.(Haser); ok {
		return h.Has(key)
	}
	_, err := tx.Get(key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}
