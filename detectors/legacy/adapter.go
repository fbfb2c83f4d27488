// Package legacy holds the rules not yet moved to packages of their own,
// as they were written before detectors became a core and one package per
// rule (issue 11), behind an adapter to the core's Analyzer. It empties as
// rules move out and then goes.
package legacy

import (
	"net/netip"
	"reflect"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
)

// The core's types, under the names these rules use.
type (
	Finding     = detectors.Finding
	Evidence    = detectors.Evidence
	Severity    = detectors.Severity
	CaptureLoss = detectors.CaptureLoss
)

// The severities.
const (
	Info    = detectors.Info
	Warning = detectors.Warning
	Error   = detectors.Error
)

// Analyzers returns the rules still here as analyzers, by name.
func Analyzers() map[string]*detectors.Analyzer {
	out := map[string]*detectors.Analyzer{}
	for _, s := range Specs() {
		out[s.ID] = analyzer(s)
	}
	return out
}

// analyzer adapts a Spec: its thresholds become number parameters of a
// struct made for it.
func analyzer(s Spec) *detectors.Analyzer {
	fields := make([]reflect.StructField, len(s.Params))
	for i, p := range s.Params {
		fields[i] = reflect.StructField{
			Name: "P" + string(rune('A'+i)), Type: reflect.TypeOf(float64(0)),
			Tag: reflect.StructTag(`param:"` + p.Name + `" doc:"` + p.Meaning + `"`),
		}
	}
	defaults := reflect.New(reflect.StructOf(fields))
	for i, p := range s.Params {
		defaults.Elem().Field(i).SetFloat(p.Default)
	}
	return detectors.DefineValue(detectors.Analyzer{Name: s.ID, Doc: s.Summary, Severity: s.Severity, Generic: s.Generic},
		defaults.Interface(), func(params any) detectors.Rule {
			v := reflect.ValueOf(params).Elem()
			p := Params{}
			for i, prm := range s.Params {
				p[prm.Name] = v.Field(i).Float()
			}
			return rule{s.New(p)}
		})
}

// rule is a legacy detector as a core rule: it forwards the events flows
// delivered, and gives its findings the subjects their fields name.
type rule struct{ d Detector }

func (r rule) Request(_ *detectors.Pass, m *flows.Message) {
	if h, ok := r.d.(flows.RequestHandler); ok {
		h.OnRequest(m)
	}
}

func (r rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if h, ok := r.d.(flows.ExchangeHandler); ok {
		h.OnExchange(x.Flows())
	}
}

func (r rule) ConnEvent(_ *detectors.Pass, e *detectors.ConnEvent) {
	if h, ok := r.d.(flows.ConnHandler); ok {
		h.OnConnEvent(e.Flows())
	}
}

func (r rule) Findings(p *detectors.Pass) []detectors.Finding {
	return subjects(r.d.Findings(env(p)))
}

func (r rule) Snapshot(p *detectors.Pass) []detectors.Finding {
	if s, ok := r.d.(snapshotter); ok {
		return subjects(s.Snapshot(env(p)))
	}
	return subjects(r.d.Findings(env(p)))
}

func env(p *detectors.Pass) *Env {
	return &Env{Nodes: p.Nodes, Conns: p.Conns, Ports: p.Ports, Start: p.Start, End: p.End}
}

// subjects fills each finding's Subject from the fields that named it.
func subjects(fs []Finding) []Finding {
	for i := range fs {
		f := &fs[i]
		s := &f.Subject
		if name, ok := f.Fields["error"].(string); ok {
			s.Error, _ = decode.ErrorCode(name)
		}
		for _, k := range []string{"client_id", "client_ids"} {
			s.ClientIDs = append(s.ClientIDs, asStrings(f.Fields[k])...)
		}
		for _, k := range []string{"client", "clients"} {
			for _, v := range asStrings(f.Fields[k]) {
				if a, err := netip.ParseAddr(v); err == nil {
					s.Clients = append(s.Clients, a)
				} else if ap, err := netip.ParseAddrPort(v); err == nil {
					s.Clients = append(s.Clients, ap.Addr())
				}
			}
		}
		for _, v := range asStrings(f.Fields["servers"]) {
			if ap, err := netip.ParseAddrPort(v); err == nil {
				s.Servers = append(s.Servers, ap)
			}
		}
	}
	return fs
}

func asStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []string:
		return x
	}
	return nil
}
