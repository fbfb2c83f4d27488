// Package detectors holds the rules that turn exchanges and connection
// events into findings: one file per detector, each emitting typed Finding
// values and doing no I/O.
package detectors

import (
	"fmt"
	"time"
)

// Severity ranks findings.
type Severity int

// Severities, in increasing order.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "?"
}

// MarshalText renders the severity as its name in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ParseSeverity parses "info", "warning" or "error".
func ParseSeverity(s string) (Severity, error) {
	switch s {
	case "info":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning or error)", s)
}

// Evidence points at a packet that shows the problem.
type Evidence struct {
	File   int    `json:"file"`
	Packet uint64 `json:"packet"`
	Conn   int    `json:"conn,omitempty"`
	What   string `json:"what"`
}

// Finding is one thing a detector says is wrong (or, at info, notable).
type Finding struct {
	Detector string    `json:"detector"`
	Severity Severity  `json:"severity"`
	Summary  string    `json:"summary"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Conns    []int     `json:"connections,omitempty"`
	Nodes    []int32   `json:"nodes,omitempty"`
	// Counts are the numbers behind the finding, by name.
	Counts map[string]int64 `json:"counts,omitempty"`
	// Fields are the key field values (topic, partition, leader id,
	// epoch, offsets...), by name, typed.
	Fields      map[string]any `json:"fields,omitempty"`
	Evidence    []Evidence     `json:"evidence,omitempty"`
	Explanation string         `json:"explanation"`
	Next        string         `json:"next"`
	// CaptureLoss, set when the report is built, says that the capture
	// lost segments on the finding's connections during its span: its
	// counts may be low and what it missed may be in the bytes lost.
	CaptureLoss *CaptureLoss `json:"capture_loss,omitempty"`
}

// CaptureLoss is what the capture lost on a finding's connections: the
// connections with gaps whose span overlaps the finding's, their gaps and
// the bytes missing.
type CaptureLoss struct {
	Conns []int `json:"connections"`
	Gaps  int   `json:"gaps"`
	Bytes int64 `json:"bytes"`
}
