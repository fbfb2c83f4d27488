// Package expect is the expectation file of a capture (format
// kfsniff-expect/v1, docs/expect.md): the findings an analysis must
// report, a rule for the others, totals that must hold and the settings
// the capture is analysed with; and the comparison of an analysis with it.
//
// It reads the analysis as the JSON report (docs/json.md), the public
// contract, and imports nothing of kfsniff's: the fixtures' generator uses
// it for kfsniff's own expectations without depending on the analyzer.
package expect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// Format names the file format and its version. Fields may be added within
// v1, never renamed or given another meaning; a breaking change gets a new
// name.
const Format = "kfsniff-expect/v1"

// Suffix ends the name of an expectation file: NAME.expect.json is the
// expectation of NAME.pcap (NAME.pcapng, NAME.pcap.gz...).
const Suffix = ".expect.json"

// DefaultTolerance is the relative tolerance of a finding's Approx values
// when the finding gives none: a duration may be measured from the first
// request or from the first response.
const DefaultTolerance = 0.05

// File is one expectation file.
type File struct {
	Format string `json:"format"`
	// Capture, Description and Source say what the capture is and where
	// it comes from; they are not compared.
	Capture     string `json:"capture,omitempty"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source,omitempty"`
	// Analysis is how the capture is analysed.
	Analysis *Analysis `json:"analysis,omitempty"`
	// Findings must each be matched by a distinct finding of the report.
	Findings []Finding `json:"findings"`
	// Others is the rule for the findings no expectation matched.
	Others Others `json:"others"`
	// Totals, if given, must hold.
	Totals *Totals `json:"totals,omitempty"`
	// Connections must each be in the report with these roles.
	Connections []Connection `json:"connections,omitempty"`
}

// Analysis is the command line's analysis settings for a capture.
type Analysis struct {
	// Options are -o settings, "detector.param=value".
	Options []string `json:"options,omitempty"`
	// Ports is --ports; MaxFrame --max-frame; BufferBudget
	// --buffer-budget; MaxWaiting --max-waiting; Filter the trailing
	// filter expression. Unset: kfsniff's defaults.
	Ports        string `json:"ports,omitempty"`
	MaxFrame     int    `json:"max_frame,omitempty"`
	BufferBudget *int   `json:"buffer_budget,omitempty"`
	MaxWaiting   *int   `json:"max_waiting,omitempty"`
	Filter       string `json:"filter,omitempty"`
}

// Finding is one finding the report must hold. Names follow the JSON
// report's findings[] (docs/json.md).
type Finding struct {
	Detector string `json:"detector"`
	// Severity is the least severity the finding may have ("info",
	// "warning", "error"); SeverityMax, if given, the most.
	Severity    string `json:"severity"`
	SeverityMax string `json:"severity_max,omitempty"`
	// Nodes must all be among the finding's node ids.
	Nodes []int32 `json:"nodes,omitempty"`
	// Counts must be equal to the finding's counts of the same name.
	Counts map[string]int64 `json:"counts,omitempty"`
	// Fields must be equal to the finding's fields of the same name, as
	// JSON values: numbers by value (1003 equals 1003.0), lists in order
	// (kfsniff sorts its lists), objects by their keys.
	Fields map[string]any `json:"fields,omitempty"`
	// Approx are counts or numeric fields (durations, rates, counts that
	// may vary) that must be within Tolerance of the value.
	Approx map[string]float64 `json:"approx,omitempty"`
	// Tolerance is relative (0.05: within 5%); 0 means DefaultTolerance.
	Tolerance float64 `json:"tolerance,omitempty"`
}

// Others is the rule for findings that match no expectation: none at or
// above Strict, unless its detector is in Allow.
type Others struct {
	// Strict is a severity ("info", "warning", "error"), or "none" for
	// no rule; empty means "warning".
	Strict string   `json:"strict,omitempty"`
	Allow  []string `json:"allow,omitempty"`
}

// Totals are capture-wide numbers that must hold, within Tolerance
// (relative; 0 means exact).
type Totals struct {
	// Requests counts requests per API, by the name in the report's
	// apis[] ("Fetch": every version) or name and version ("Fetch v17").
	Requests map[string]int64 `json:"requests,omitempty"`
	// Counts are numbers of the report's totals by name
	// ("decode_errors": 0).
	Counts    map[string]int64 `json:"counts,omitempty"`
	Tolerance float64          `json:"tolerance,omitempty"`
}

// Connection is a connection the report must list, by its client and
// server addresses, with exactly these roles (in any order).
type Connection struct {
	Client string   `json:"client"`
	Server string   `json:"server"`
	Roles  []string `json:"roles"`
}

// severities are the severity names in increasing order, as the report
// writes them.
var severities = []string{"info", "warning", "error"}

// rank is a severity's place in severities, -1 if unknown.
func rank(s string) int { return slices.Index(severities, s) }

// Parse reads an expectation file: unknown fields are errors (a typo must
// not make an expectation silently hold), keys are case-sensitive and
// none may be given twice in one object (encoding/json takes "Findings"
// for "findings", and the last of two: `"findings": [...], "Findings":
// []` was an expectation that always held), numbers keep their
// precision.
func Parse(b []byte) (*File, error) {
	if err := strictKeys(b, reflect.TypeFor[File]()); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return &f, f.Validate()
}

// MaxFileBytes bounds an expectation file (kfsniff's own are a few KiB).
const MaxFileBytes = 4 << 20

// Load reads and parses the expectation file at path; errors name it.
// It must be a regular file (a link to one is followed) of at most
// MaxFileBytes: a FIFO, a device or /dev/zero is refused, not read.
func Load(path string) (*File, error) {
	b, err := ReadRegular(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Validate checks what the JSON types cannot.
func (f *File) Validate() error {
	if f.Format != Format {
		if f.Format == "" {
			return fmt.Errorf("no \"format\": want %q", Format)
		}
		return fmt.Errorf("format %q: this kfsniff reads %q", f.Format, Format)
	}
	for i, e := range f.Findings {
		if e.Detector == "" {
			return fmt.Errorf("findings[%d]: no detector", i)
		}
		if rank(e.Severity) < 0 {
			return fmt.Errorf("findings[%d] (%s): severity %q: want info, warning or error", i, e.Detector, e.Severity)
		}
		if e.SeverityMax != "" && rank(e.SeverityMax) < rank(e.Severity) {
			return fmt.Errorf("findings[%d] (%s): severity_max %q: want info, warning or error, not below severity", i, e.Detector, e.SeverityMax)
		}
		if e.Tolerance < 0 {
			return fmt.Errorf("findings[%d] (%s): negative tolerance", i, e.Detector)
		}
	}
	if s := f.Others.Strict; s != "" && s != "none" && rank(s) < 0 {
		return fmt.Errorf("others.strict %q: want info, warning, error or none", s)
	}
	if f.Totals != nil {
		if f.Totals.Tolerance < 0 {
			return errors.New("totals: negative tolerance")
		}
		for k := range f.Totals.Requests {
			if strings.TrimSpace(k) == "" {
				return errors.New("totals.requests: empty API name")
			}
		}
	}
	for i, c := range f.Connections {
		if c.Client == "" || c.Server == "" {
			return fmt.Errorf("connections[%d]: client and server are both needed", i)
		}
	}
	return nil
}

// Marshal writes f as kfsniff writes expectation files: indented by two
// spaces, '<', '>' and '&' as they are, a newline at the end.
func (f *File) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	doc := *f
	if doc.Findings == nil {
		doc.Findings = []Finding{}
	}
	err := enc.Encode(doc)
	return b.Bytes(), err
}
