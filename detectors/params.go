package detectors

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// A rule's parameters are a struct; each field that is one is tagged:
//
//	MinDuration time.Duration `param:"min-duration" unit:"s" alias:"min-duration-s" doc:"..."`
//
// param is its name for -o (RULE.NAME=VALUE), doc what it means. Its type
// is its unit: time.Duration (a Go duration, "1.5s", "250ms"; a bare
// number is read in the tag unit's, "s" if none), int (a count), float64
// (a number: a factor, a ratio) or bool. alias is an older name still
// accepted, whose bare numbers are in the same unit. A size is a Bytes
// ("16MiB", "512KiB"; a bare number in the unit tag's unit, bytes if none).

// Param is one parameter of a rule, as the user sees it.
type Param struct {
	Name    string
	Alias   string
	Doc     string
	Kind    string // "duration", "size", "count", "number" or "bool"
	Default string // the default, as -o takes it
	unit    time.Duration
	size    Bytes // a size's unit
	v       reflect.Value
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	bytesType    = reflect.TypeOf(Bytes(0))
)

// paramsOf lists the parameters of the struct p points at.
func paramsOf(p any) ([]Param, error) {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, errors.New("parameters must be a struct")
	}
	v = v.Elem()
	var out []Param
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name := f.Tag.Get("param")
		if name == "" {
			continue
		}
		prm := Param{Name: name, Alias: f.Tag.Get("alias"), Doc: f.Tag.Get("doc"), v: v.Field(i)}
		switch {
		case f.Type == durationType:
			prm.Kind = "duration"
			prm.unit = time.Second
			if u := f.Tag.Get("unit"); u != "" {
				d, err := time.ParseDuration("1" + u)
				if err != nil {
					return nil, fmt.Errorf("%s: unit %q: %v", name, u, err)
				}
				prm.unit = d
			}
		case f.Type == bytesType:
			prm.Kind = "size"
			u, err := parseBytes(f.Tag.Get("unit"), 1)
			if err != nil {
				return nil, fmt.Errorf("%s: unit %q: %v", name, f.Tag.Get("unit"), err)
			}
			prm.size = u
		case f.Type.Kind() == reflect.Int:
			prm.Kind = "count"
		case f.Type.Kind() == reflect.Float64:
			prm.Kind = "number"
		case f.Type.Kind() == reflect.Bool:
			prm.Kind = "bool"
		default:
			return nil, fmt.Errorf("%s: type %s is not a parameter type", name, f.Type)
		}
		if prm.Doc == "" {
			return nil, fmt.Errorf("%s: no doc", name)
		}
		prm.Default = prm.String()
		out = append(out, prm)
	}
	return out, nil
}

func findParam(ps []Param, name string) *Param {
	for i := range ps {
		if ps[i].Name == name || ps[i].Alias != "" && ps[i].Alias == name {
			return &ps[i]
		}
	}
	return nil
}

// String is the parameter's value as -o takes it.
func (p *Param) String() string {
	switch p.Kind {
	case "duration":
		return time.Duration(p.v.Int()).String()
	case "size":
		return Bytes(p.v.Int()).String()
	case "count":
		return strconv.FormatInt(p.v.Int(), 10)
	case "number":
		return strconv.FormatFloat(p.v.Float(), 'f', -1, 64)
	case "bool":
		return strconv.FormatBool(p.v.Bool())
	}
	return "?"
}

// set parses s into the parameter.
func (p *Param) set(s string) error {
	s = strings.TrimSpace(s)
	switch p.Kind {
	case "duration":
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			p.v.SetInt(int64(f * float64(p.unit)))
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 10s, 250ms; a bare number is in %s)", unitName(p.unit))
		}
		p.v.SetInt(int64(d))
	case "size":
		b, err := parseBytes(s, p.size)
		if err != nil {
			return err
		}
		p.v.SetInt(int64(b))
	case "count":
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not a whole number")
		}
		p.v.SetInt(int64(n))
	case "number":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("not a number")
		}
		p.v.SetFloat(f)
	case "bool":
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("not true or false")
		}
		p.v.SetBool(b)
	}
	return nil
}

func unitName(d time.Duration) string {
	switch d {
	case time.Millisecond:
		return "milliseconds"
	case time.Second:
		return "seconds"
	case time.Minute:
		return "minutes"
	}
	return d.String() + " units"
}

// ParseSetting splits "rule.param=value" (kfsniff -o) into settings, keyed
// by rule, then parameter.
func ParseSetting(s string, into map[string]map[string]string) error {
	k, v, ok := strings.Cut(s, "=")
	rule, param, dot := strings.Cut(strings.TrimSpace(k), ".")
	if !ok || !dot || rule == "" || param == "" {
		return fmt.Errorf("detector setting %q: want detector.param=value", s)
	}
	if into[rule] == nil {
		into[rule] = map[string]string{}
	}
	into[rule][param] = strings.TrimSpace(v)
	return nil
}
