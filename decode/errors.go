package decode

import (
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrorName returns Kafka's name for an error code, e.g.
// NOT_LEADER_OR_FOLLOWER for 6 (kerr still uses the pre-2.7 name
// NOT_LEADER_FOR_PARTITION), or "UNKNOWN_ERROR_CODE_N".
func ErrorName(code int16) string {
	switch code {
	case 0:
		return "NONE"
	case 6:
		return "NOT_LEADER_OR_FOLLOWER"
	}
	// kerr answers UNKNOWN_SERVER_ERROR for codes it does not know.
	if e := kerr.TypedErrorForCode(code); e != nil && e.Code == code {
		return e.Message
	}
	return "UNKNOWN_ERROR_CODE_" + strconv.Itoa(int(code))
}

// KnownError reports whether code is an error code Kafka defines (kerr's
// table, and 0): the codes ErrorName does not call UNKNOWN_ERROR_CODE_N.
// A table keyed by error codes from the wire keeps one entry for the
// others, lest each code be an entry.
func KnownError(code int16) bool {
	if code == 0 || code == 6 {
		return true
	}
	e := kerr.TypedErrorForCode(code)
	return e != nil && e.Code == code
}

// errPlan says where the error codes of one struct type are: the indexes of
// its int16 error fields, and of the fields (structs, slices of structs)
// that contain error codes further down.
type errPlan struct {
	codes  []int
	nested []int
}

// keyPlans holds, per API key, the plans of its response type and the
// types within it, each key's built on its first response and only read
// afterwards. Building all of them at init took about a millisecond of
// every run's start-up (issue 14), for the handful of keys a capture holds.
var keyPlans [kmsg.MaxKey + 1]struct {
	once  sync.Once
	plans map[reflect.Type]*errPlan
}

// plansFor returns the plans of key k's response types (nil for a key
// kmsg does not know).
func plansFor(k int16) map[reflect.Type]*errPlan {
	if k < 0 || int(k) >= len(keyPlans) {
		return nil
	}
	e := &keyPlans[k]
	e.once.Do(func() {
		if r := kmsg.ResponseForKey(k); r != nil {
			e.plans = make(map[reflect.Type]*errPlan)
			buildPlan(e.plans, reflect.TypeOf(r).Elem())
		}
	})
	return e.plans
}

// buildPlan returns the plan for struct type t, or nil if t holds no error
// codes anywhere.
func buildPlan(plans map[reflect.Type]*errPlan, t reflect.Type) *errPlan {
	if p, ok := plans[t]; ok {
		return p
	}
	plans[t] = nil // cycle guard
	p := &errPlan{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Int16 && isErrorField(f.Name):
			p.codes = append(p.codes, i)
		case ft.Kind() == reflect.Struct:
			if buildPlan(plans, ft) != nil {
				p.nested = append(p.nested, i)
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			if buildPlan(plans, ft.Elem()) != nil {
				p.nested = append(p.nested, i)
			}
		}
	}
	if len(p.codes) == 0 && len(p.nested) == 0 {
		p = nil
	}
	plans[t] = p
	return p
}

func isErrorField(name string) bool {
	return name == "Error" || strings.HasSuffix(name, "ErrorCode")
}

// ErrorCodes calls fn for every non-zero error code anywhere in resp: the
// top-level code and those of every topic, partition, group or member.
func ErrorCodes(resp kmsg.Response, fn func(code int16)) {
	if resp == nil {
		return
	}
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	walkErrors(plansFor(resp.Key()), v.Elem(), fn)
}

func walkErrors(plans map[reflect.Type]*errPlan, v reflect.Value, fn func(int16)) {
	p := plans[v.Type()]
	if p == nil {
		return
	}
	for _, i := range p.codes {
		if c := int16(v.Field(i).Int()); c != 0 {
			fn(c)
		}
	}
	for _, i := range p.nested {
		f := v.Field(i)
		if f.Kind() == reflect.Slice {
			for j := 0; j < f.Len(); j++ {
				walkErrors(plans, f.Index(j), fn)
			}
		} else {
			walkErrors(plans, f, fn)
		}
	}
}
