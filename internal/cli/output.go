package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/errs"
	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/sandbox"
)

// ExitCode is one row of the documented, stable exit code table.
type ExitCode struct {
	Code    int
	Meaning string
	Kinds   []errs.Kind
}

// ExitCodes is the exit code table of docs/json-contract.md. A kind that
// is in no row exits with 1. Rows may be added, never renumbered.
var ExitCodes = []ExitCode{
	{0, "success", nil},
	{1, "any other failure: storage, host I/O, an unexpected error", []errs.Kind{errs.IoError, errs.StorageError, errs.StoreUnavailable, mountd.NotMounted, mountd.MountBusy, mountd.MountFailed}},
	{2, "usage: an unknown command or flag, a wrong number of arguments", nil},
	{3, "something named does not exist", []errs.Kind{errs.NotFound, errs.VaultNotFound, errs.CheckpointNotFound}},
	{4, "something to be created already exists", []errs.Kind{errs.AlreadyExists, errs.VaultExists}},
	{5, "an invalid name, path or value", []errs.Kind{errs.InvalidInput, errs.InvalidPath, errs.NameTooLong}},
	{6, "the vault is locked by another writer", []errs.Kind{errs.VaultLocked}},
	{7, "a quota would be exceeded", []errs.Kind{errs.QuotaExceeded}},
	{8, "the vault file is damaged, not a vault, or from a newer avfs", []errs.Kind{errs.CorruptVault, errs.UnsupportedFormat}},
	{9, "the vault has forks standing on it", []errs.Kind{errs.VaultHasForks}},
	{10, "no vault selected", []errs.Kind{errs.NoActiveVault}},
	{11, "the operation does not fit what is at the path", []errs.Kind{errs.NotADirectory, errs.NotAFile, errs.NotEmpty, errs.TooManyLinks, errs.CrossDevice}},
	{12, "the operation is not permitted", []errs.Kind{errs.PermissionDenied, proxy.ApprovalFromRun}},
	{13, "a destructive command needs --yes", []errs.Kind{errs.ConfirmationRequired}},
	{14, "proxy exec: the policy denied the command; nothing ran", nil},
	{15, "proxy exec: the command awaits approval, or --approval is not approved, rejected, expired, used, for another request or not made by proxy approve",
		[]errs.Kind{proxy.ApprovalRequired, proxy.ApprovalRejected, proxy.ApprovalExpired, proxy.ApprovalUsed, proxy.ApprovalMismatch, proxy.ApprovalForged}},
	{16, "FUSE is not available: mount and proxy exec need /dev/fuse (Linux) or macFUSE (macOS)", []errs.Kind{errs.FuseUnavailable}},
	{17, "proxy exec --isolate on: the kernel isolation is unavailable here; nothing ran", []errs.Kind{sandbox.Unavailable}},
	{124, "proxy exec: the command timed out, state `timed_out` (its own exit code is in the envelope)", nil},
	{130, "interrupted by a signal; for proxy exec, a run printed with state `interrupted`", []errs.Kind{errs.Interrupted}},
}

// UsageExitCode is the exit code of a command line that does not parse.
const UsageExitCode = 2

// exitCode maps an error kind to its exit code.
func exitCode(kind errs.Kind) int {
	for _, row := range ExitCodes {
		for _, k := range row.Kinds {
			if k == kind {
				return row.Code
			}
		}
	}
	return 1
}

// usageError is a command line that does not parse.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// invalidf is an InvalidInput error: a value that parses but is wrong.
func invalidf(op, format string, args ...any) error {
	return errs.New(errs.InvalidInput, op, format, args...)
}

// fail prints err (as JSON with --json) and returns the exit code. cmd is
// the command that failed, when known.
func (a *app) fail(cmd *cobra.Command, err error) int {
	var st exitStatus
	if errors.As(err, &st) {
		return int(st) // the result is already printed
	}
	var ue *usageError
	usage := errors.As(err, &ue) || (!a.ran && !errors.As(err, new(*errs.Error)))
	kind := errs.KindOf(err)
	code := exitCode(kind)
	if errors.Is(err, context.Canceled) {
		kind, code = errs.Interrupted, exitCode(errs.Interrupted)
	}
	if usage {
		kind, code = errs.InvalidInput, UsageExitCode
	}
	msg, hint := message(err)
	if a.jsonOut {
		doc := errorDoc(err, kind, code)
		if usage && cmd != nil {
			doc["usage"] = cmd.UseLine()
		}
		if a.streamLines {
			(&eventWriter{w: a.env.Stdout}).line(map[string]any{"event": "error", "error": doc})
			return code
		}
		a.emit(doc)
		return code
	}
	fmt.Fprintf(a.env.Stderr, "avfs: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(a.env.Stderr, "hint: %s\n", hint)
	}
	if usage && cmd != nil {
		fmt.Fprintf(a.env.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// ErrorDocument is the JSON document (docs/schema/error.json) that a
// command failing with err prints with --json, and its exit code. The MCP
// server sends the same document in its tool errors.
func ErrorDocument(err error) (map[string]any, int) {
	kind := errs.KindOf(err)
	code := exitCode(kind)
	if errors.Is(err, context.Canceled) {
		kind, code = errs.Interrupted, exitCode(errs.Interrupted)
	}
	return errorDoc(err, kind, code), code
}

// errorDoc is err's error document, of the given kind and exit code.
func errorDoc(err error, kind errs.Kind, code int) map[string]any {
	msg, hint := message(err)
	doc := map[string]any{}
	var e *errs.Error
	if errors.As(err, &e) {
		maps.Copy(doc, e.Extra)
		setIf(doc, "op", e.Op)
		if isCheckpointErr(e) {
			setIf(doc, "checkpoint", e.Path)
		} else {
			setIf(doc, "path", e.Path)
		}
		setIf(doc, "vault", e.Vault)
	}
	setIf(doc, "hint", hint)
	doc["error"] = string(kind)
	doc["message"] = msg
	doc["exit_code"] = code
	return doc
}

func setIf(doc map[string]any, key, val string) {
	if val != "" {
		doc[key] = val
	}
}

// message is an error's text without its hint, and the hint.
func message(err error) (msg, hint string) {
	var e *errs.Error
	if errors.As(err, &e) {
		c := *e
		c.Hint = ""
		msg = c.Error()
		if e != err {
			// A wrapper added context around the typed error: keep it.
			msg = strings.Replace(err.Error(), e.Error(), msg, 1)
		}
		return msg, e.Hint
	}
	return err.Error(), ""
}

// humanPrinter is a result with a plain-text form for people.
type humanPrinter interface {
	human(w io.Writer)
}

// emit prints a result: one JSON document with --json, else its human
// form (nothing when it has none).
func (a *app) emit(v any) {
	if a.jsonOut {
		enc := json.NewEncoder(a.env.Stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(a.env.Stderr, "avfs: encoding JSON: %v\n", err)
		}
		return
	}
	if h, ok := v.(humanPrinter); ok {
		h.human(a.env.Stdout)
	}
}

// ms is a duration in milliseconds, the unit of every *_ms field.
func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// utc normalises a time for output: RFC 3339 in UTC.
func utc(t time.Time) time.Time { return t.UTC() }

// helpResult is --help with --json.
type helpResult struct {
	Command string `json:"command"`
	Help    string `json:"help"`
}

func helpText(c *cobra.Command) string {
	text := c.Long
	if text == "" {
		text = c.Short
	}
	return strings.TrimSpace(text) + "\n\n" + c.UsageString()
}

// sizeString renders a byte count for people.
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
