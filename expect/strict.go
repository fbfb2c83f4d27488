package expect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"syscall"
)

// ReadRegular reads the file at path if it is a regular file (links
// followed) of at most max bytes. It opens without blocking, so that a
// FIFO is refused rather than waited on, and checks what it opened, so
// that a link swapped between a look and the open changes nothing.
func ReadRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, FileKind(st.Mode()))
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, over the %d bytes an expectation file may have", path, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: over the %d bytes an expectation file may have", path, max)
	}
	return b, nil
}

// FileKind names what a file that is not a regular one is ("a FIFO", "a
// character device", ...), for messages refusing it.
func FileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}

// strictKeys walks the JSON document b along the type t and refuses a
// key given twice in one object, and a struct's key that matches one of
// its fields only when case is ignored. What does not have t's shape is
// left for the decoder to refuse with its own words.
func strictKeys(b []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := walk(dec, t, "")
	if errors.Is(err, io.EOF) {
		return nil // the decoder says what is missing
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return nil // the decoder reports it
	}
	return err
}

// maxWalkDepth bounds the nesting followed (fields' free values).
const maxWalkDepth = 64

func walk(dec *json.Decoder, t reflect.Type, at string) error {
	if strings.Count(at, ".") > maxWalkDepth {
		return fmt.Errorf("%s: nested too deep", at)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case '{':
		fields := map[string]reflect.Type{}
		var elem reflect.Type
		isStruct := t != nil && t.Kind() == reflect.Struct
		if isStruct {
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if f.IsExported() && name != "-" && name != "" {
					fields[name] = f.Type
				}
			}
		} else if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := tok.(string)
			where := strings.TrimPrefix(at+"."+k, ".")
			if seen[k] {
				return fmt.Errorf("key %q given twice", where)
			}
			seen[k] = true
			next := elem
			if isStruct {
				ft, ok := fields[k]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, k) {
							return fmt.Errorf("key %q: keys are case-sensitive: %q", where, strings.TrimPrefix(at+"."+name, "."))
						}
					}
				}
				next = ft
			}
			if err := walk(dec, next, where); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
