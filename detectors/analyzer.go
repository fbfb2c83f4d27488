// Package detectors is the core of kfsniff's rules: what a rule is
// (Analyzer), what it may implement to see the traffic (the hooks), what
// it may consult (Pass), and what it reports (Finding). Each rule lives in
// a package of its own under detectors/ and no rule imports another; the
// list of rules is detectors/all.
//
// The shape is golang.org/x/tools/go/analysis's: an Analyzer value per
// check, with its name, its documentation and its parameters, and a Pass
// with what the driver knows. A rule is streaming: it implements the hooks
// for the events it needs (franz-go's kgo checks optional hook interfaces
// the same way) and reports its findings at the end.
package detectors

import (
	"fmt"
	"reflect"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Analyzer describes one rule: its name (the finding's "detector"), what it
// finds, the highest severity it gives, its parameters and how to make it.
// Make one with Define.
type Analyzer struct {
	// Name is the rule's id, e.g. "not-leader-loop".
	Name string
	// Doc says what the rule finds and when at which severity, for
	// --list-detectors and docs/detectors.md.
	Doc string
	// Severity is the highest severity the rule reports.
	Severity Severity
	// Generic rules (error rates) restate what a specific rule may
	// already explain: their findings drop to info when a finding of a
	// specific rule, at least as severe, names the same error for the
	// same client or server (Subject.Explains).
	Generic bool
	// Recorded names committed captures (paths from the repository
	// root) of real clients meeting what the rule finds; the pipeline's
	// tests check that the rule finds it in each. NotRecorded says why
	// there is none (traffic no real client or test server can make), and
	// which synthetic capture shows the rule instead.
	Recorded    []string
	NotRecorded string

	// params points at the parameters with their defaults; make builds
	// the rule from a copy.
	params any
	make   func(params any) Rule
}

// Define makes an Analyzer whose parameters are P (a struct whose fields
// are tagged `param:"name" doc:"..."`; see Params), with the defaults
// given, built by make. Check says whether they are well defined;
// detectors/all's tests check every rule, so that no run reads every
// rule's tags at start-up (7 % of the instructions of a run on
// fixtures/pcaps/basic.pcap did, with New's copy of them below).
func Define[P any](a Analyzer, defaults P, make func(P) Rule) *Analyzer {
	a.params, a.make = &defaults, func(p any) Rule { return make(*p.(*P)) }
	return &a
}

// Check reports the first error in the definition of the analyzer's
// parameters (a tag, a type, a default outside its range), or nil.
func (a *Analyzer) Check() error {
	if _, err := paramsOf(a.params); err != nil {
		return fmt.Errorf("detectors: %s: %v", a.Name, err)
	}
	return nil
}

// Params lists the analyzer's parameters with their defaults.
func (a *Analyzer) Params() []Param {
	ps, _ := paramsOf(a.params)
	return ps
}

// New makes the rule with its default parameters changed by settings
// (parameter name -> value as given to -o).
func (a *Analyzer) New(settings map[string]string) (Rule, error) {
	p, err := a.set(settings)
	if err != nil {
		return nil, err
	}
	return a.make(p), nil
}

// set is a copy of the defaults changed by settings; with none, the
// defaults themselves (make takes them by value).
func (a *Analyzer) set(settings map[string]string) (any, error) {
	if len(settings) == 0 {
		return a.params, nil
	}
	p := reflect.New(reflect.TypeOf(a.params).Elem())
	p.Elem().Set(reflect.ValueOf(a.params).Elem())
	ps, err := paramsOf(p.Interface())
	if err != nil {
		return nil, fmt.Errorf("detectors: %s: %v", a.Name, err)
	}
	for name, v := range settings {
		prm := findParam(ps, name)
		if prm == nil {
			return nil, fmt.Errorf("unknown detector setting %q (kfsniff --list-detectors lists them)", a.Name+"."+name)
		}
		if err := prm.set(v); err != nil {
			return nil, fmt.Errorf("detector setting %s.%s=%s: %v", a.Name, name, v, err)
		}
	}
	return p.Interface(), nil
}

// Rule is one analyzer's state over a run. Findings is called once the
// capture has been read; a rule may finalise its state there (settle what
// is still open), in which case it also implements Snapshotter.
type Rule interface {
	Findings(p *Pass) []Finding
}

// The hooks a rule may implement, each optional: the Set checks them once,
// by type assertion, and calls only those implemented.
type (
	// RequestHook sees every request frame as it is decoded.
	RequestHook interface {
		Request(p *Pass, m *flows.Message)
	}
	// ExchangeHook sees every exchange: a response with its request, a
	// response whose request was not captured, a request never answered
	// or that needs no answer.
	ExchangeHook interface {
		Exchange(p *Pass, x *Exchange)
	}
	// KeyedExchangeHook is an ExchangeHook that does nothing with an
	// exchange whose request was captured with an API key other than
	// those ExchangeKeys lists (called once, by NewSet): the Set hands it
	// only exchanges of those keys, and those whose request was not
	// captured. Every exchange costs each rule it is handed a call, and
	// most rules want one or two APIs of the 30 or so a capture has.
	KeyedExchangeHook interface {
		ExchangeHook
		ExchangeKeys() []kmsg.Key
	}
	// ConnHook sees connection events: opened, closed, refused,
	// attempts never answered.
	ConnHook interface {
		ConnEvent(p *Pass, e *ConnEvent)
	}
	// Snapshotter is a rule whose Findings finalise its state: Snapshot
	// reports what Findings would now, changing nothing the rule holds
	// and sharing nothing it changes later with the findings returned.
	// The Findings of any other rule must leave its state as it was, so
	// that they can be asked for while the capture runs (Set.Snapshot).
	Snapshotter interface {
		Snapshot(p *Pass) []Finding
	}
	// Bounded is a rule that says what its bounds kept out of its
	// judgement, by name (counts; zero ones are left out): the report
	// lists them under bounds_reached as "rule.name", so that nothing a
	// bound cut goes unsaid even when no finding mentions it.
	Bounded interface {
		Cut() map[string]int64
	}
)
