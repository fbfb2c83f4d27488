package report

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// JSON that never aborts. encoding/json refuses some values the wire can
// carry: NaN and infinite float64s (kmsg's DescribeClientQuotas and
// AlterClientQuotas values), times outside years 0-9999 (pcapng
// if_tsresol/if_tsoffset can put a packet there), and an error from any
// MarshalJSON. One such value made the whole report, or every later
// --frames --json line, fail. marshal encodes as encoding/json does and,
// only when that fails, walks the value itself: NaN, +Inf and -Inf become
// the strings "NaN", "+Inf" and "-Inf" (docs/json.md), a time outside the
// range is clamped to its first or last instant and reported, any other
// value that cannot be encoded is written as the string of its error and
// reported. The output is what encoding/json writes for every other
// value, fields in the same order.

// Clamped instants: the first and last times JSON (RFC 3339) can hold.
var (
	jsonMinTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	jsonMaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// JSONIssue is a value that could not be written as it is: where it is in
// the document (a path such as "capture.first" or "body.Entries[0]"),
// and what was written instead.
type JSONIssue struct {
	Path string
	What string
}

func (i JSONIssue) Error() string { return i.Path + ": " + i.What }

// marshalWalk writes v's JSON when encoding/json has failed on it, with the
// values it had to write otherwise (see above).
func marshalWalk(v any) ([]byte, []JSONIssue) {
	var s safeEncoder
	b := s.value(nil, reflect.ValueOf(v), "")
	return append(b, '\n'), s.issues
}

// safeEncoder writes JSON by reflection, following encoding/json's rules
// for the types kfsniff encodes (struct tags with omitempty and "-",
// embedded structs, maps sorted by key, []byte as base64, Marshaler and
// TextMarshaler), with the exceptions above.
type safeEncoder struct {
	issues []JSONIssue
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
)

func (s *safeEncoder) issue(path, format string, args ...any) {
	s.issues = append(s.issues, JSONIssue{Path: cmp.Or(path, "(top)"), What: fmt.Sprintf(format, args...)})
}

func (s *safeEncoder) value(b []byte, v reflect.Value, path string) []byte {
	if !v.IsValid() {
		return append(b, "null"...)
	}
	if v.Type() == timeType {
		return s.time(b, v.Interface().(time.Time), path)
	}
	if v.Kind() == reflect.Pointer && v.IsNil() || v.Kind() == reflect.Interface && v.IsNil() {
		return append(b, "null"...)
	}
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface {
		if m, ok := as[json.Marshaler](v); ok {
			return s.marshaler(b, m, path)
		}
		if m, ok := as[encoding.TextMarshaler](v); ok {
			t, err := m.MarshalText()
			if err != nil {
				s.issue(path, "%v; written as that error", err)
				return quote(b, err.Error())
			}
			return quote(b, string(t))
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if m, ok := v.Interface().(json.Marshaler); ok && v.Elem().Type() != timeType {
			return s.marshaler(b, m, path)
		}
		return s.value(b, v.Elem(), path)
	case reflect.Interface:
		return s.value(b, v.Elem(), path)
	case reflect.Bool:
		return strconv.AppendBool(b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(b, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.AppendUint(b, v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return appendFloat(b, v.Float(), v.Type().Bits())
	case reflect.String:
		return quote(b, v.String())
	case reflect.Struct:
		return s.structure(b, v, path)
	case reflect.Map:
		return s.mapping(b, v, path)
	case reflect.Slice:
		if v.IsNil() {
			return append(b, "null"...)
		}
		if v.Type().Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(v.Type().Elem()).Implements(marshalerType) &&
			!reflect.PointerTo(v.Type().Elem()).Implements(textMarshalerType) {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, v.Bytes())
			return append(b, '"')
		}
		return s.list(b, v, path)
	case reflect.Array:
		return s.list(b, v, path)
	}
	s.issue(path, "a %s cannot be written as JSON; written as null", v.Type())
	return append(b, "null"...)
}

// as finds the method of interface M (MarshalJSON, MarshalText) on v or,
// when addressable, on &v, as encoding/json does.
func as[M any](v reflect.Value) (M, bool) {
	t := reflect.TypeFor[M]()
	if v.Type().Implements(t) {
		m, ok := v.Interface().(M)
		return m, ok
	}
	if v.CanAddr() && reflect.PointerTo(v.Type()).Implements(t) {
		m, ok := v.Addr().Interface().(M)
		return m, ok
	}
	var none M
	return none, false
}

func (s *safeEncoder) marshaler(b []byte, m json.Marshaler, path string) []byte {
	out, err := m.MarshalJSON()
	if err == nil {
		var c bytes.Buffer
		if err = json.Compact(&c, out); err == nil {
			return append(b, c.Bytes()...)
		}
	}
	s.issue(path, "%v; written as that error", err)
	return quote(b, err.Error())
}

// time writes t as time.Time's MarshalJSON does, clamped to years 0-9999.
func (s *safeEncoder) time(b []byte, t time.Time, path string) []byte {
	switch y := t.Year(); {
	case y > 9999:
		s.issue(path, "time in year %d, after JSON's 9999; written as %s", y, jsonMaxTime.Format(time.RFC3339Nano))
		t = jsonMaxTime
	case y < 0:
		s.issue(path, "time in year %d, before JSON's 0; written as %s", y, jsonMinTime.Format(time.RFC3339Nano))
		t = jsonMinTime
	}
	out, err := t.MarshalJSON()
	if err != nil { // the zone's offset: not a time kfsniff makes
		s.issue(path, "%v; written as that error", err)
		return quote(b, err.Error())
	}
	return append(b, out...)
}

// appendFloat writes f as encoding/json does; NaN and the infinities,
// which JSON has no number for, as the strings "NaN", "+Inf", "-Inf".
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	var out []byte
	if bits == 32 {
		out, _ = json.Marshal(float32(f))
	} else {
		out, _ = json.Marshal(f)
	}
	return append(b, out...)
}

// quote writes s as a JSON string, escaped as encoding/json escapes it
// without HTML escaping.
func quote(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

func (s *safeEncoder) list(b []byte, v reflect.Value, path string) []byte {
	b = append(b, '[')
	for i := range v.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = s.value(b, v.Index(i), path+"["+strconv.Itoa(i)+"]")
	}
	return append(b, ']')
}

func (s *safeEncoder) mapping(b []byte, v reflect.Value, path string) []byte {
	if v.IsNil() {
		return append(b, "null"...)
	}
	type entry struct {
		key string
		v   reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		k := it.Key()
		var name string
		switch {
		case k.Kind() == reflect.String:
			name = k.String()
		case k.Type().Implements(textMarshalerType):
			t, err := k.Interface().(encoding.TextMarshaler).MarshalText()
			if err != nil {
				s.issue(path, "a key: %v; written as that error", err)
				t = []byte(err.Error())
			}
			name = string(t)
		case k.CanInt():
			name = strconv.FormatInt(k.Int(), 10)
		case k.CanUint():
			name = strconv.FormatUint(k.Uint(), 10)
		default:
			s.issue(path, "a key of type %s cannot be written as JSON; left out", k.Type())
			continue
		}
		entries = append(entries, entry{name, it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = quote(b, e.key)
		b = append(b, ':')
		b = s.value(b, e.v, path+"."+e.key)
	}
	return append(b, '}')
}

// field is a struct field as encoding/json sees it.
type field struct {
	name      string
	index     []int
	omitEmpty bool
}

// fieldsOf lists t's fields in encoding/json's order: declaration order,
// the fields of untagged embedded structs in place, a name given by a
// shallower or tagged field winning (ambiguous names are left out).
func fieldsOf(t reflect.Type) []field {
	type cand struct {
		field
		depth  int
		tagged bool
	}
	var all []cand
	var walk func(t reflect.Type, index []int, depth int)
	walk = func(t reflect.Type, index []int, depth int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clip(index), i)
			ft := sf.Type
			if sf.Anonymous {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && ft.Kind() == reflect.Struct {
					walk(ft, idx, depth+1)
					continue
				}
				if !sf.IsExported() {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			tagged := name != ""
			all = append(all, cand{field{cmp.Or(name, sf.Name), idx, strings.Contains(","+opts+",", ",omitempty,")}, depth, tagged})
		}
	}
	walk(t, nil, 0)
	var out []field
	for i, c := range all {
		keep := true
		for j, o := range all {
			if j == i || o.name != c.name {
				continue
			}
			if o.depth < c.depth || o.depth == c.depth && o.tagged && !c.tagged ||
				o.depth == c.depth && o.tagged == c.tagged {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c.field)
		}
	}
	return out
}

func (s *safeEncoder) structure(b []byte, v reflect.Value, path string) []byte {
	b = append(b, '{')
	first := true
	for _, f := range fieldsOf(v.Type()) {
		fv, ok := fieldByIndex(v, f.index)
		if !ok || f.omitEmpty && isEmpty(fv) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = quote(b, f.name)
		b = append(b, ':')
		p := f.name
		if path != "" {
			p = path + "." + f.name
		}
		b = s.value(b, fv, p)
	}
	return append(b, '}')
}

// fieldByIndex is v.FieldByIndex, false through a nil embedded pointer.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
