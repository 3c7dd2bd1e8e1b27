package avfs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentvfs/agentvfs/internal/proxy"
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
