package expect

import (
	"encoding/json"
	"fmt"
	"strings"
)

// writtenTotals are the totals an expectation written from a report
// keeps: what says whether the capture was read and paired as before.
var writtenTotals = []string{"requests", "responses", "unanswered_requests", "unmatched_responses", "decode_errors", "framing_errors", "gaps"}

// FromReport is the expectation of what a report holds now, for
// --write-expect (a golden file's -update): every finding with its
// severity, nodes, counts and fields (numbers with a fraction, such as
// durations and rates, within DefaultTolerance), no other finding at
// warning or above, requests per API and version and the totals that say
// how the capture was read, exactly. The user then removes what does not
// matter.
func FromReport(rep *Report, capture string, a *Analysis) *File {
	f := &File{
		Format:      Format,
		Capture:     capture,
		Description: "written by kfsniff --write-expect: remove what need not hold, loosen what may vary (docs/expect.md)",
		Analysis:    a,
		Findings:    []Finding{},
		Others:      Others{Strict: "warning"},
	}
	for _, got := range rep.Findings {
		e := Finding{Detector: got.Detector, Severity: got.Severity, Nodes: got.Nodes}
		if len(got.Counts) > 0 {
			e.Counts = got.Counts
		}
		for k, v := range got.Fields {
			if n, ok := v.(json.Number); ok && strings.ContainsAny(string(n), ".eE") {
				if x, err := n.Float64(); err == nil {
					if e.Approx == nil {
						e.Approx = map[string]float64{}
					}
					e.Approx[k] = x
					continue
				}
			}
			if e.Fields == nil {
				e.Fields = map[string]any{}
			}
			e.Fields[k] = v
		}
		f.Findings = append(f.Findings, e)
	}
	t := &Totals{Requests: map[string]int64{}, Counts: map[string]int64{}}
	for _, api := range rep.APIs {
		if api.Requests > 0 {
			t.Requests[fmt.Sprintf("%s v%d", api.Name, api.Version)] += api.Requests
		}
	}
	for _, k := range writtenTotals {
		if n, ok := rep.Totals[k].(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				t.Counts[k] = v
			}
		}
	}
	if len(t.Requests) == 0 {
		t.Requests = nil
	}
	f.Totals = t
	return f
}
