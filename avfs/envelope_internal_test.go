package avfs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/mountrec"
	"github.com/agentvfs/agentvfs/internal/proxy"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// fill sets every field reachable from v to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1)
	}
}

// zeros lists the fields reachable from v that are zero.
func zeros(where string, v reflect.Value) []string {
	if v.IsZero() {
		return []string{where}
	}
	var out []string
	switch v.Kind() {
	case reflect.Pointer:
		out = zeros(where, v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return nil
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				out = append(out, zeros(where+"."+f.Name, v.Field(i))...)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			out = append(out, zeros(where+"[]", v.Index(i))...)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			out = append(out, zeros(where+"[]", v.MapIndex(k))...)
		}
	}
	return out
}

// TestEnvelopeWhole: converting a run's record fills every field of
// Envelope, so none is forgotten at the boundary.
func TestEnvelopeWhole(t *testing.T) {
	var in proxy.Envelope
	fill(reflect.ValueOf(&in).Elem())
	in.Request.CommandMode = "shell"
	out := envelope(&in)
	if z := zeros("Envelope", reflect.ValueOf(out)); len(z) != 0 {
		t.Errorf("fields the conversion left zero: %s", strings.Join(z, ", "))
	}
	if out.Result.Duration != time.Millisecond || out.Request.Linger != time.Millisecond {
		t.Errorf("durations from ms: %s, %s; want 1ms", out.Result.Duration, out.Request.Linger)
	}
	if envelope(nil) != nil || undoResult(nil) != nil {
		t.Error("nil records convert to non-nil")
	}
	var u proxy.UndoResult
	fill(reflect.ValueOf(&u).Elem())
	if z := zeros("UndoResult", reflect.ValueOf(undoResult(&u))); len(z) != 0 {
		t.Errorf("UndoResult fields left zero: %s", strings.Join(z, ", "))
	}
}

// leaves calls fn on every leaf field reachable from v (a struct's
// fields, a pointer's target, the first element of a slice of structs),
// with its path.
func leaves(path string, v reflect.Value, fn func(string, reflect.Value)) {
	switch {
	case v.Kind() == reflect.Pointer:
		leaves(path, v.Elem(), fn)
	case v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]():
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				leaves(path+"."+f.Name, v.Field(i), fn)
			}
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		leaves(path+"[0]", v.Index(0), fn)
	default:
		fn(path, v)
	}
}

// notInAPI are the fields of a run's record deliberately left out of
// Envelope.
var notInAPI = map[string]bool{
	".SchemaVersion": true, ".Kind": true, // the document's own discriminators
	".Request.Timeout":     true, // the string form of TimeoutMs
	".Result.Approval.MAC": true, // the approval's binding, for the proxy alone
}

// convertsEvery fails t for each leaf field of an internal record that
// conv leaves out of its result, unless skip lists it (and then for each
// it does not leave out). prep adjusts a filled record.
func convertsEvery[T any](t *testing.T, conv func(*T) any, prep func(*T), skip map[string]bool) {
	t.Helper()
	filled := func() *T {
		var r T
		fill(reflect.ValueOf(&r).Elem())
		if prep != nil {
			prep(&r)
		}
		return &r
	}
	base := conv(filled())
	var paths []string
	leaves("", reflect.ValueOf(filled()).Elem(), func(p string, _ reflect.Value) { paths = append(paths, p) })
	name := reflect.TypeFor[T]().String()
	for _, p := range paths {
		r := filled()
		leaves("", reflect.ValueOf(r).Elem(), func(q string, v reflect.Value) {
			if q == p {
				v.Set(reflect.Zero(v.Type()))
			}
		})
		switch same := reflect.DeepEqual(conv(r), base); {
		case same && !skip[p]:
			t.Errorf("%s%s is not converted into the API", name, p)
		case !same && skip[p]:
			t.Errorf("%s%s is converted: take it out of the skip list", name, p)
		}
	}
}

// TestEnvelopeConvertsEveryField: each field of a run's record shows in
// the converted Envelope, so a field added to the record (and to the
// JSON contract) cannot be forgotten here: zeroing it alone changes what
// the conversion returns. The same holds for the other records.
func TestEnvelopeConvertsEveryField(t *testing.T) {
	convertsEvery(t, func(e *proxy.Envelope) any { return envelope(e) },
		func(e *proxy.Envelope) { e.Request.CommandMode = "shell" }, notInAPI)
	convertsEvery(t, func(u *proxy.UndoResult) any { return undoResult(u) }, nil,
		map[string]bool{".SchemaVersion": true, ".Kind": true})
	convertsEvery(t, func(i *registry.Info) any { return vaultInfo(*i) }, nil, nil)
	convertsEvery(t, func(c *vfs.Checkpoint) any { return checkpoint(*c) }, nil,
		map[string]bool{".Layer": true}) // an internal layer id
	convertsEvery(t, func(i *mountrec.Info) any { return mountInfo(*i) }, nil, nil)
	convertsEvery(t, func(c *vfs.Change) any { return changes([]vfs.Change{*c}) }, nil, nil)
}
