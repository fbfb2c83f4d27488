package legacy

import (
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
	}
}
