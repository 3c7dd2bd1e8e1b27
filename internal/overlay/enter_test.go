package overlay

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentvfs/agentvfs/internal/errs"
)

// TestEnterFailed: the helper's setup pipe says nothing when the command
// started, and otherwise carries its typed error whole; what does not
// parse is an IoError with the text it held.
func TestEnterFailed(t *testing.T) {
	if err := EnterFailed(nil); err != nil {
		t.Errorf("an empty pipe: %v", err)
	}
	err := EnterFailed([]byte(`{"kind":"NotFound","op":"proxy exec","path":"/no/such","message":"--cwd: gone","hint":"look"}`))
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.NotFound || e.Op != "proxy exec" || e.Path != "/no/such" || e.Hint != "look" || e.Err.Error() != "--cwd: gone" {
		t.Errorf("a typed failure came back as %#v", err)
	}
	err = EnterFailed([]byte("fatal error: runtime"))
	if !errs.Is(err, errs.IoError) || !strings.Contains(err.Error(), "fatal error: runtime") {
		t.Errorf("garbage came back as %v", err)
	}
}
