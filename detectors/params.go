package detectors

import (
	"errors"
	"fmt"
	"math"
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
//
// Every value is checked against its parameter's range when set: no
// parameter takes a negative, NaN or infinite value, nor a duration or
// size beyond what it can hold; range:"LO,HI" narrows a number or count
// (a fraction: range:"0,1"). A default outside its range is an error of
// the rule's definition.

// Param is one parameter of a rule, as the user sees it.
type Param struct {
	Name    string
	Alias   string
	Doc     string
	Kind    string // "duration", "size", "count", "number" or "bool"
	Default string // the default, as -o takes it
	unit    time.Duration
	size    Bytes // a size's unit
	lo, hi  float64
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
		prm := Param{Name: name, Alias: f.Tag.Get("alias"), Doc: f.Tag.Get("doc"), v: v.Field(i), lo: 0, hi: math.Inf(1)}
		if err := prm.parseRange(f.Tag.Get("range")); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
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
		if err := prm.inRange(prm.value()); err != nil {
			return nil, fmt.Errorf("%s: default %s: %v", name, prm.Default, err)
		}
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

// set parses s into the parameter, within its range.
func (p *Param) set(s string) error {
	s = strings.TrimSpace(s)
	switch p.Kind {
	case "duration":
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			d := f * float64(p.unit)
			if err := p.inRange(d); err != nil {
				return err
			}
			if math.Abs(d) >= math.MaxInt64 {
				return fmt.Errorf("too long for a duration (at most %s)", time.Duration(math.MaxInt64))
			}
			p.v.SetInt(int64(d))
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 10s, 250ms; a bare number is in %s)", unitName(p.unit))
		}
		if err := p.inRange(float64(d)); err != nil {
			return err
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
		if err := p.inRange(float64(n)); err != nil {
			return err
		}
		p.v.SetInt(int64(n))
	case "number":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("not a number")
		}
		if err := p.inRange(f); err != nil {
			return err
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

// parseRange reads a range tag, "LO,HI" (either may be empty: 0 and no
// bound), within the default range (no negative value).
func (p *Param) parseRange(tag string) error {
	if tag == "" {
		return nil
	}
	lo, hi, ok := strings.Cut(tag, ",")
	if !ok {
		return fmt.Errorf("range %q: want LO,HI", tag)
	}
	var err error
	if lo != "" {
		if p.lo, err = strconv.ParseFloat(lo, 64); err != nil || p.lo < 0 || math.IsInf(p.lo, 0) {
			return fmt.Errorf("range %q: bad low bound", tag)
		}
	}
	if hi != "" {
		if p.hi, err = strconv.ParseFloat(hi, 64); err != nil || !(p.hi >= p.lo) {
			return fmt.Errorf("range %q: bad high bound", tag)
		}
	}
	return nil
}

// value is the parameter's value as a number (a duration or a size in its
// smallest unit), for the range.
func (p *Param) value() float64 {
	switch p.Kind {
	case "number":
		return p.v.Float()
	case "duration", "size", "count":
		return float64(p.v.Int())
	}
	return 0
}

// inRange checks a value (a duration in nanoseconds) against the
// parameter's range; NaN and the infinities are never in it.
func (p *Param) inRange(f float64) error {
	if p.Kind == "bool" {
		return nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < p.lo || f > p.hi {
		return fmt.Errorf("out of range: want %s", p.rangeText())
	}
	return nil
}

// rangeText says what values the parameter takes.
func (p *Param) rangeText() string {
	unit := func(f float64) string {
		switch p.Kind {
		case "duration":
			return time.Duration(f).String()
		case "size":
			return Bytes(f).String()
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	if math.IsInf(p.hi, 1) {
		return "a " + p.Kind + " of at least " + unit(p.lo)
	}
	return "a " + p.Kind + " from " + unit(p.lo) + " to " + unit(p.hi)
}
