package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
)

// The --json document, streamed. Encoded whole (json.Encoder, SafeJSON,
// appendIndent), a report of 100,000 connections (a 106 MB document) was
// held three times over at the end of the run, and the peak RSS of the run
// was the report's, not the analysis's (BENCHMARKS.md, Growth). Here the
// top object is written member by member and each of its lists element by
// element; each piece is encoded as encoding/json encodes it (fields in
// its order, omitempty; an element is addressable in its list, so it is
// encoded through its address), made safe (SafeJSON only changes runes
// inside strings) and indented at its depth (appendIndent with the
// indents above it as prefix), which gives the bytes the whole document
// gave: TestWriteJSONStreamsAsEncoder and every golden.

// jsonStream writes one document to w, through one reused piece buffer.
type jsonStream struct {
	w     *bufio.Writer
	warn  func(JSONIssue)
	piece bytes.Buffer
	enc   *json.Encoder
	out   []byte
}

func writeJSONStream(w io.Writer, r *Report, warn func(JSONIssue)) error {
	js := &jsonStream{w: bufio.NewWriterSize(w, 64<<10), warn: warn}
	js.enc = json.NewEncoder(&js.piece)
	js.enc.SetEscapeHTML(false)
	js.object(reflect.ValueOf(r).Elem())
	js.w.WriteByte('\n')
	return js.w.Flush() // a bufio.Writer keeps the first error
}

// object writes the top struct v, member by member.
func (js *jsonStream) object(v reflect.Value) {
	js.w.WriteByte('{')
	first := true
	for _, f := range fieldsOf(v.Type()) {
		fv, ok := fieldByIndex(v, f.index)
		if !ok || f.omitEmpty && isEmpty(fv) {
			continue
		}
		if !first {
			js.w.WriteByte(',')
		}
		first = false
		js.w.WriteString("\n  ")
		js.w.Write(quote(nil, f.name))
		js.w.WriteString(": ")
		if fv.Kind() == reflect.Slice && !streamWhole(fv.Type()) {
			switch {
			case fv.Len() > 0:
				js.list(fv, f.name)
			case fv.IsNil():
				js.w.WriteString("null")
			default:
				// encoding/json's "[]" without its encoder of the
				// element type: building one reflects over every type
				// the element reaches (start-up: a clean capture's
				// empty findings, events and incidents).
				js.w.WriteString("[]")
			}
			continue
		}
		js.piece1(fv, "  ", f.name)
	}
	if !first {
		js.w.WriteByte('\n')
	}
	js.w.WriteByte('}')
}

// streamWhole reports whether a slice of type t is one value to encoding/
// json rather than a list (a []byte, base64; a type of its own marshaling).
func streamWhole(t reflect.Type) bool {
	e := t.Elem()
	if e.Kind() == reflect.Uint8 && !reflect.PointerTo(e).Implements(marshalerType) && !reflect.PointerTo(e).Implements(textMarshalerType) {
		return true
	}
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)
}

// list writes the non-empty slice v (member name) element by element.
func (js *jsonStream) list(v reflect.Value, name string) {
	js.w.WriteByte('[')
	for i := range v.Len() {
		if i > 0 {
			js.w.WriteByte(',')
		}
		js.w.WriteString("\n    ")
		js.piece1(v.Index(i), "    ", name+"["+strconv.Itoa(i)+"]")
	}
	js.w.WriteString("\n  ]")
}

// piece1 writes v, at path in the document, indented after prefix.
func (js *jsonStream) piece1(v reflect.Value, prefix, path string) {
	if v.CanAddr() {
		v = v.Addr()
	}
	js.piece.Reset()
	compact := js.piece.Bytes()
	if err := js.enc.Encode(v.Interface()); err == nil {
		compact = js.piece.Bytes()
	} else {
		var s safeEncoder
		compact = s.value(nil, v, path)
		for _, i := range s.issues {
			if js.warn != nil {
				js.warn(i)
			}
		}
	}
	compact = bytes.TrimSuffix(compact, []byte{'\n'})
	js.out = appendIndent(js.out[:0], SafeJSON(compact), prefix, "  ")
	js.w.Write(js.out)
}
