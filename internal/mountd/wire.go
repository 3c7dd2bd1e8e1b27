package mountd

import (
	"errors"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// wireError is a typed error as it crosses from the serving process to
// its client, on the ready pipe (start.go) and the control socket
// (control.go): the one place where an errs.Error is taken apart and put
// back together, so that its kind, op, path, vault, hint and extra
// fields arrive as they left.
type wireError struct {
	Kind    errs.Kind      `json:"kind"`
	Message string         `json:"message"` // the cause, without op, path, vault and hint
	Op      string         `json:"op,omitempty"`
	Path    string         `json:"path,omitempty"`
	Vault   string         `json:"vault,omitempty"`
	Hint    string         `json:"hint,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
}

// toWire takes err apart; an untyped error keeps its kind (errs.KindOf)
// and its text.
func toWire(err error) *wireError {
	var te *errs.Error
	if !errors.As(err, &te) {
		return &wireError{Kind: errs.KindOf(err), Message: err.Error()}
	}
	w := &wireError{Kind: te.Kind, Op: te.Op, Path: te.Path, Vault: te.Vault, Hint: te.Hint, Extra: te.Extra}
	c := *te
	c.Op, c.Path, c.Vault, c.Hint = "", "", "", ""
	w.Message = c.Error()
	return w
}

// err puts the error back together.
func (w *wireError) err() error {
	return &errs.Error{Kind: w.Kind, Op: w.Op, Path: w.Path, Vault: w.Vault, Hint: w.Hint, Extra: w.Extra,
		Err: errors.New(w.Message)}
}
