package detectors

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/flows"
)

// Detector is one rule over the traffic. It receives events through the
// optional handler interfaces of flows (flows.RequestHandler,
// flows.ExchangeHandler, flows.ConnHandler: implement only what is needed)
// and reports its findings once the capture has been read.
//
// Findings is called at the end of the run; a detector may finalise its
// state there (settle what is still open, stop recording). A detector whose
// Findings does so also implements Snapshot; the Findings of any other
// detector must leave its state as it was, so that it can be called while
// the capture runs (Set.Snapshot).
type Detector interface {
	Findings(env *Env) []Finding
}

// snapshotter is a detector whose Findings finalise its state: Snapshot
// reports what Findings would report now, changing nothing the detector
// holds, and shares nothing the detector changes later with the findings
// it returns.
type snapshotter interface {
	Snapshot(env *Env) []Finding
}

// Env is what detectors may consult when they report.
type Env struct {
	Nodes *flows.Nodes
	Conns []*flows.Conn
	// Ports are the run's Kafka ports (--ports).
	Ports *flows.Ports
	// Start and End bound the capture in time.
	Start, End time.Time
}

// Spec describes a detector: its id, what it finds, its thresholds and how
// to build it. Severity is the highest severity it reports.
type Spec struct {
	ID       string
	Severity Severity
	Summary  string
	Params   []Param
	New      func(p Params) Detector
	// Generic detectors (error rates) restate what a specific detector
	// may already explain: their findings drop to info when a finding of
	// a specific detector, at least as severe, names the same error for
	// the same client or server.
	Generic bool
}

// Param is a threshold with its documented default.
type Param struct {
	Name    string
	Default float64
	Meaning string
}

// Params are a detector's resolved thresholds by name.
type Params map[string]float64

// Int returns a threshold as an int.
func (p Params) Int(name string) int { return int(p[name]) }

// Float returns a threshold.
func (p Params) Float(name string) float64 { return p[name] }

// Seconds returns a threshold given in seconds as a Duration.
func (p Params) Seconds(name string) time.Duration {
	return time.Duration(p[name] * float64(time.Second))
}

// Specs lists every detector, in the order they are described.
func Specs() []Spec {
	return []Spec{
		// One line per detector, each defined in its own file.
		internalErrorSpec(),
		notLeaderLoopSpec(),
		stalledFetchSpec(),
		livenessSpec(),
		duplicateBatchesSpec(),
		replicaDivergenceSpec(),
		electionStallSpec(),
		connRefusedSpec(),
		listenerConflictSpec(),
		errorStormSpec(),
		throttledSpec(),
		unansweredSpec(),
		slowResponsesSpec(),
	}
}

// Set is the detectors of one run. It is a flows handler that fans events
// out to the detectors that want them.
type Set struct {
	dets  []Detector
	ids   []string
	req   []flows.RequestHandler
	ex    []flows.ExchangeHandler
	conn  []flows.ConnHandler
	specs []Spec
}

// New builds every detector with its thresholds: the defaults, changed by
// overrides keyed "detector.param" (kfsniff -o not-leader-loop.min-responses=5).
func New(overrides map[string]float64) (*Set, error) {
	specs := Specs()
	known := map[string]bool{}
	for _, s := range specs {
		for _, p := range s.Params {
			known[s.ID+"."+p.Name] = true
		}
	}
	for k := range overrides {
		if !known[k] {
			return nil, fmt.Errorf("unknown detector setting %q (kfsniff --list-detectors lists them)", k)
		}
	}
	set := &Set{specs: specs}
	for _, s := range specs {
		p := Params{}
		for _, prm := range s.Params {
			p[prm.Name] = prm.Default
			if v, ok := overrides[s.ID+"."+prm.Name]; ok {
				p[prm.Name] = v
			}
		}
		d := s.New(p)
		set.dets = append(set.dets, d)
		set.ids = append(set.ids, s.ID)
		if h, ok := d.(flows.RequestHandler); ok {
			set.req = append(set.req, h)
		}
		if h, ok := d.(flows.ExchangeHandler); ok {
			set.ex = append(set.ex, h)
		}
		if h, ok := d.(flows.ConnHandler); ok {
			set.conn = append(set.conn, h)
		}
	}
	return set, nil
}

// ParseOverride parses "detector.param=value".
func ParseOverride(s string, into map[string]float64) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("detector setting %q: want detector.param=value", s)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return fmt.Errorf("detector setting %q: value is not a number", s)
	}
	into[strings.TrimSpace(k)] = f
	return nil
}

// OnRequest implements flows.RequestHandler.
func (s *Set) OnRequest(m *flows.Message) {
	for _, h := range s.req {
		h.OnRequest(m)
	}
}

// OnExchange implements flows.ExchangeHandler.
func (s *Set) OnExchange(x *flows.Exchange) {
	for _, h := range s.ex {
		h.OnExchange(x)
	}
}

// OnConnEvent implements flows.ConnHandler.
func (s *Set) OnConnEvent(e *flows.ConnEvent) {
	for _, h := range s.conn {
		h.OnConnEvent(e)
	}
}

// Findings collects every detector's findings, most severe first, then by
// time and detector id, so output is deterministic. It is the end of the
// run: some detectors finalise their state (see Snapshot).
func (s *Set) Findings(env *Env) []Finding { return s.findings(env, false) }

// Snapshot returns the findings as they stand, the same as Findings would
// return now, without finalising or disturbing any detector: it may be
// called any number of times while the capture runs (on the goroutine
// that feeds the Set its events), and the final Findings are the same as
// without it. The findings returned share no state the detectors change
// later, so they may be handed to another goroutine.
func (s *Set) Snapshot(env *Env) []Finding { return s.findings(env, true) }

func (s *Set) findings(env *Env, snapshot bool) []Finding {
	var out []Finding
	generic := map[int]bool{}
	for i, d := range s.dets {
		var fs []Finding
		if sn, ok := d.(snapshotter); ok && snapshot {
			fs = sn.Snapshot(env)
		} else {
			fs = d.Findings(env)
		}
		for _, f := range fs {
			if f.Detector == "" {
				f.Detector = s.ids[i]
			}
			if s.specs[i].Generic {
				generic[len(out)] = true
			}
			out = append(out, f)
		}
	}
	for i := range out {
		if !generic[i] || out[i].Severity == Info {
			continue
		}
		for j := range out {
			if !generic[j] && explains(&out[j], &out[i]) {
				f := &out[i]
				f.Severity = Info
				f.Summary += " (explained by " + out[j].Detector + ")"
				if f.Fields == nil {
					f.Fields = map[string]any{}
				}
				f.Fields["explained_by"] = out[j].Detector
				break
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if !a.First.Equal(b.First) {
			return a.First.Before(b.First)
		}
		return a.Detector < b.Detector
	})
	return out
}

// explains reports whether the specific finding g accounts for the generic
// finding f: at least as severe, the same error name, and a client id,
// client host or server in common.
func explains(g, f *Finding) bool {
	if g.Severity < f.Severity || f.Fields["error"] == nil || f.Fields["error"] != g.Fields["error"] {
		return false
	}
	mine := map[string]bool{}
	for _, k := range []string{"client_id", "client_ids", "client", "clients", "servers"} {
		for _, v := range asStrings(f.Fields[k]) {
			mine[v] = true
		}
	}
	for _, k := range []string{"client_id", "client_ids", "client", "clients", "servers"} {
		for _, v := range asStrings(g.Fields[k]) {
			if mine[v] {
				return true
			}
		}
	}
	return false
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

// Describe writes the detectors and their thresholds, for --list-detectors.
func Describe(specs []Spec) string {
	var b strings.Builder
	for _, s := range specs {
		fmt.Fprintf(&b, "%s (up to %s)\n", s.ID, s.Severity)
		for _, line := range wrap(s.Summary, 76) {
			fmt.Fprintf(&b, "    %s\n", line)
		}
		for _, p := range s.Params {
			fmt.Fprintf(&b, "    -o %s.%s=%s\n", s.ID, p.Name, strconv.FormatFloat(p.Default, 'f', -1, 64))
			for _, line := range wrap(p.Meaning, 72) {
				fmt.Fprintf(&b, "        %s\n", line)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
