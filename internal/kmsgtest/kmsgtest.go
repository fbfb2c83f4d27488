// Package kmsgtest helps tests build and compare kmsg messages: a
// deterministic filler that sets every field of any request or response,
// a comparison that names the first differing field, and the frames of a
// request or response as a client or broker writes them (frame.go). It is
// used by tests, the capture generator and the benchmarks, never by the
// binary.
package kmsgtest

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Filler sets every exported field of a kmsg message to a deterministic,
// non-default value: strings "sN", integers 1..100, true, one or two
// elements per slice, nullable strings and structs set, ids of counting
// bytes. Record fields get Batch; other byte fields a few bytes. The
// top-level Version and every UnknownTags are left alone.
type Filler struct {
	n int
	// Batch is put in Records and RecordBatches fields.
	Batch []byte
	// Err is the first field that could not be filled.
	Err error
}

var tagsType = reflect.TypeFor[kmsg.Tags]()

func (f *Filler) next() int { f.n++; return f.n }

// Fill sets every exported field of v (depth 0 is the message itself).
func (f *Filler) Fill(v reflect.Value, depth int) {
	if depth > 16 {
		f.fail(fmt.Errorf("%s nests deeper than 16", v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() || sf.Type == tagsType || depth == 0 && sf.Name == "Version" {
				continue
			}
			fv := v.Field(i)
			if sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Uint8 {
				switch sf.Name {
				case "Records", "RecordBatches":
					fv.SetBytes(bytes.Clone(f.Batch))
				default:
					fv.SetBytes([]byte{0xca, 0xfe, byte(f.next())})
				}
				continue
			}
			f.Fill(fv, depth+1)
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.Fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n := 1 + f.next()%2
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			f.Fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			f.Fill(v.Index(i), depth+1)
		}
	case reflect.String:
		v.SetString("s" + strconv.Itoa(f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(1 + f.next()%100))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(1 + f.next()%100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	default:
		f.fail(fmt.Errorf("cannot fill %s (kind %s)", v.Type(), v.Kind()))
	}
}

func (f *Filler) fail(err error) {
	if f.Err == nil {
		f.Err = err
	}
}

// Request returns kmsg's request for key at version with every field
// filled.
func (f *Filler) Request(key, version int16) kmsg.Request {
	r := kmsg.RequestForKey(key)
	f.Fill(reflect.ValueOf(r).Elem(), 0)
	r.SetVersion(version)
	return r
}

// Response is Request's counterpart.
func (f *Filler) Response(key, version int16) kmsg.Response {
	r := kmsg.ResponseForKey(key)
	f.Fill(reflect.ValueOf(r).Elem(), 0)
	r.SetVersion(version)
	return r
}

// Same is reflect.DeepEqual except that floats compare by their bits,
// so that a NaN decoded from fuzz input equals itself.
func Same(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return Same(a.Elem(), b.Elem())
	case reflect.Struct:
		if a.Type() == tagsType {
			return reflect.DeepEqual(a.Interface(), b.Interface())
		}
		for i := 0; i < a.NumField(); i++ {
			if !Same(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		fallthrough
	case reflect.Array:
		for i := 0; i < a.Len(); i++ {
			if !Same(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// FirstDiff returns the path of the first difference between a and b.
func FirstDiff(a, b reflect.Value, path string) string {
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: types %s and %s", path, a.Type(), b.Type())
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return fmt.Sprintf("%s: nil %v vs %v", path, a.IsNil(), b.IsNil())
		}
		return FirstDiff(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		if a.Type() == tagsType {
			break
		}
		for i := 0; i < a.NumField(); i++ {
			if !Same(a.Field(i), b.Field(i)) {
				return FirstDiff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
			}
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d (nil %v) vs %d (nil %v)", path, a.Len(), a.IsNil(), b.Len(), b.IsNil())
		}
		for i := 0; i < a.Len(); i++ {
			if !Same(a.Index(i), b.Index(i)) {
				return FirstDiff(a.Index(i), b.Index(i), path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	return fmt.Sprintf("%s: %#v vs %#v", path, a.Interface(), b.Interface())
}

// DiffBytes describes where got first differs from want.
func DiffBytes(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d bytes, want %d; first difference at offset %d: got % x, want % x",
		len(got), len(want), i, got[i:min(len(got), i+8)], want[i:min(len(want), i+8)])
}
