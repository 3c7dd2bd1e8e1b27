package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// ErrorSchema returns docs/schema/error.json (given as it is now) with the
// enum of its "error" property set to ErrorKinds(), every other byte of
// layout kept: the clients' typed error kinds are generated from it, so the
// list comes from the code (genmanifest writes it; a test checks it).
func ErrorSchema(current []byte) ([]byte, error) {
	doc, err := decodeOrdered(json.NewDecoder(bytes.NewReader(current)))
	if err != nil {
		return nil, fmt.Errorf("error.json: %w", err)
	}
	root, ok := doc.(*ordered)
	if !ok {
		return nil, fmt.Errorf("error.json: not an object")
	}
	props, _ := root.get("properties").(*ordered)
	if props == nil {
		return nil, fmt.Errorf("error.json: no properties")
	}
	errProp, _ := props.get("error").(*ordered)
	if errProp == nil {
		return nil, fmt.Errorf("error.json: no error property")
	}
	kinds := []any{}
	for _, k := range ErrorKinds() {
		kinds = append(kinds, string(k))
	}
	errProp.set("enum", kinds)
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ordered is a JSON object that keeps its keys in the order read.
type ordered struct {
	keys []string
	vals map[string]any
}

func (o *ordered) get(k string) any { return o.vals[k] }

func (o *ordered) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func decodeOrdered(d *json.Decoder) (any, error) {
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				o.set(kt.(string), v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := d.Token()
			return a, err
		}
		return nil, io.ErrUnexpectedEOF
	default:
		return t, nil
	}
}
