package expect

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Report is what a comparison reads of a JSON report (docs/json.md).
type Report struct {
	Schema      string          `json:"schema"`
	Totals      map[string]any  `json:"totals"`
	APIs        []ReportAPI     `json:"apis"`
	Connections []Connection    `json:"connections"`
	Findings    []ReportFinding `json:"findings"`
}

// ReportAPI is one entry of the report's apis[].
type ReportAPI struct {
	Name     string `json:"name"`
	Version  int16  `json:"version"`
	Requests int64  `json:"requests"`
}

// ReportFinding is one entry of the report's findings[].
type ReportFinding struct {
	Detector string           `json:"detector"`
	Severity string           `json:"severity"`
	Summary  string           `json:"summary"`
	Nodes    []int32          `json:"nodes"`
	Counts   map[string]int64 `json:"counts"`
	Fields   map[string]any   `json:"fields"`
}

// ReadReport reads a JSON report (kfsniff --json), numbers with their
// precision.
func ReadReport(r io.Reader) (*Report, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("reading the JSON report: %w", err)
	}
	if rep.Schema != "kfsniff/v1" {
		return nil, fmt.Errorf("reading the JSON report: schema %q, want kfsniff/v1", rep.Schema)
	}
	return &rep, nil
}

// Check reports how a finding with these values fails to match e (the
// first way), or nil. Fields and counts may be of any type encoding/json
// writes as the report does.
func (e Finding) Check(detector, severity string, nodes []int32, counts map[string]int64, fields map[string]any) error {
	if detector != e.Detector {
		return fmt.Errorf("detector %s, want %s", detector, e.Detector)
	}
	if ms := e.mismatches(severity, nodes, counts, fields); len(ms) > 0 {
		return fmt.Errorf("%s: %s", detector, ms[0])
	}
	return nil
}

// Mismatches lists every way f fails to match e (its detector aside).
func (e Finding) Mismatches(f ReportFinding) []string {
	return e.mismatches(f.Severity, f.Nodes, f.Counts, f.Fields)
}

func (e Finding) mismatches(severity string, nodes []int32, counts map[string]int64, fields map[string]any) []string {
	var out []string
	if r := rank(severity); r < rank(e.Severity) || (e.SeverityMax != "" && r > rank(e.SeverityMax)) {
		want := e.Severity
		if e.SeverityMax != "" && e.SeverityMax != e.Severity {
			want = e.Severity + " to " + e.SeverityMax
		} else if e.SeverityMax == "" && e.Severity != "error" {
			want = e.Severity + " or above"
		}
		out = append(out, fmt.Sprintf("severity %s, want %s", severity, want))
	}
	for _, n := range e.Nodes {
		if !slices.Contains(nodes, n) {
			out = append(out, fmt.Sprintf("nodes %v lack %d", nodes, n))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Counts)) {
		v := e.Counts[k]
		if got, ok := counts[k]; !ok {
			out = append(out, fmt.Sprintf("no count %s, want %d", k, v))
		} else if got != v {
			out = append(out, fmt.Sprintf("count %s = %d, want %d", k, got, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		got, ok := fields[k]
		if !ok {
			out = append(out, fmt.Sprintf("no field %s, want %s", k, canonical(e.Fields[k])))
			continue
		}
		if a, b := canonical(got), canonical(e.Fields[k]); a != b {
			out = append(out, fmt.Sprintf("field %s = %s, want %s", k, a, b))
		}
	}
	tol := cmp.Or(e.Tolerance, DefaultTolerance)
	for _, k := range slices.Sorted(maps.Keys(e.Approx)) {
		v := e.Approx[k]
		var got float64
		if c, ok := counts[k]; ok {
			got = float64(c)
		} else if f, ok := fields[k]; ok {
			var err error
			if got, err = strconv.ParseFloat(canonical(f), 64); err != nil {
				out = append(out, fmt.Sprintf("field %s = %s is not a number", k, canonical(f)))
				continue
			}
		} else {
			out = append(out, fmt.Sprintf("no field or count %s, want about %g", k, v))
			continue
		}
		if math.Abs(got-v) > tol*math.Abs(v) {
			out = append(out, fmt.Sprintf("%s = %g, want %g ± %g%%", k, got, v, 100*tol))
		}
	}
	return out
}

// Problem kinds.
const (
	Missing    = "missing"    // no finding of the expected detector is left
	Mismatch   = "mismatch"   // findings of the detector, none with the expected values
	Unexpected = "unexpected" // a finding the rule for others forbids
	Total      = "totals"     // a total out of its tolerance
	Conn       = "connection" // a connection absent or with other roles
)

// Problem is one way a report fails its expectation.
type Problem struct {
	Kind string
	// Want is the expectation (Missing, Mismatch), or the total or
	// connection, in words.
	Want string
	// Got is the nearest finding (Mismatch) or the finding
	// (Unexpected).
	Got *ReportFinding
	// Why says how Got differs, or what the total or connection was.
	Why []string
}

// Result is a comparison.
type Result struct {
	Problems []Problem
	// Findings counts the expectations of findings; Matched those met.
	Findings, Matched int
}

// Held reports whether the expectation holds.
func (r Result) Held() bool { return len(r.Problems) == 0 }

// Check compares a report with the expectation.
func Check(f *File, rep *Report) Result {
	res := Result{Findings: len(f.Findings)}
	// Each expectation takes a distinct finding: a maximum matching
	// (Kuhn's augmenting paths), so that an expectation does not take
	// the only finding another one could have.
	fits := make([][]int, len(f.Findings))
	for i, e := range f.Findings {
		for j, got := range rep.Findings {
			if got.Detector == e.Detector && len(e.Mismatches(got)) == 0 {
				fits[i] = append(fits[i], j)
			}
		}
	}
	owner := slices.Repeat([]int{-1}, len(rep.Findings)) // finding -> expectation, -1
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for _, j := range fits[i] {
			if seen[j] {
				continue
			}
			seen[j] = true
			if owner[j] < 0 || augment(owner[j], seen) {
				owner[j] = i
				return true
			}
		}
		return false
	}
	for i := range f.Findings {
		if augment(i, make([]bool, len(rep.Findings))) {
			res.Matched++
		}
	}
	// An expectation not met: the nearest finding of its detector left
	// (fewest differences) is a mismatch, and is not also unexpected.
	taken := make([]bool, len(rep.Findings))
	for j, i := range owner {
		taken[j] = i >= 0
	}
	for i, e := range f.Findings {
		if slices.Contains(owner, i) {
			continue
		}
		best, why := -1, []string(nil)
		for j, got := range rep.Findings {
			if taken[j] || got.Detector != e.Detector {
				continue
			}
			if ms := e.Mismatches(got); best < 0 || len(ms) < len(why) {
				best, why = j, ms
			}
		}
		if best < 0 {
			res.Problems = append(res.Problems, Problem{Kind: Missing, Want: e.String()})
			continue
		}
		taken[best] = true
		got := rep.Findings[best]
		res.Problems = append(res.Problems, Problem{Kind: Mismatch, Want: e.String(), Got: &got, Why: why})
	}
	strict := cmp.Or(f.Others.Strict, "warning")
	if strict != "none" {
		for j, got := range rep.Findings {
			if taken[j] || rank(got.Severity) < rank(strict) || slices.Contains(f.Others.Allow, got.Detector) {
				continue
			}
			got := got
			res.Problems = append(res.Problems, Problem{Kind: Unexpected, Got: &got,
				Why: []string{fmt.Sprintf("no %s finding at %s or above is expected", got.Detector, strict)}})
		}
	}
	if f.Totals != nil {
		res.Problems = append(res.Problems, checkTotals(f.Totals, rep)...)
	}
	for _, c := range f.Connections {
		i := slices.IndexFunc(rep.Connections, func(g Connection) bool { return g.Client == c.Client && g.Server == c.Server })
		want := fmt.Sprintf("connection %s -> %s with roles %v", c.Client, c.Server, c.Roles)
		if i < 0 {
			res.Problems = append(res.Problems, Problem{Kind: Conn, Want: want, Why: []string{"no such connection"}})
			continue
		}
		if got := rep.Connections[i].Roles; !sameSet(got, c.Roles) {
			res.Problems = append(res.Problems, Problem{Kind: Conn, Want: want, Why: []string{fmt.Sprintf("roles %v", got)}})
		}
	}
	return res
}

func checkTotals(t *Totals, rep *Report) []Problem {
	var out []Problem
	within := func(got, want int64) bool {
		return math.Abs(float64(got-want)) <= t.Tolerance*math.Abs(float64(want))
	}
	tol := ""
	if t.Tolerance > 0 {
		tol = fmt.Sprintf(" ± %g%%", 100*t.Tolerance)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Requests)) {
		want := t.Requests[k]
		name, version, byVersion := strings.Cut(strings.TrimSpace(k), " v")
		var got int64
		for _, a := range rep.APIs {
			if a.Name == name && (!byVersion || strconv.Itoa(int(a.Version)) == version) {
				got += a.Requests
			}
		}
		if !within(got, want) {
			out = append(out, Problem{Kind: Total, Want: fmt.Sprintf("%s requests: %d%s", k, want, tol),
				Why: []string{fmt.Sprintf("%d in the capture", got)}})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Counts)) {
		want := t.Counts[k]
		v, ok := rep.Totals[k]
		n, isNum := v.(json.Number)
		got, err := n.Int64()
		switch {
		case !ok:
			out = append(out, Problem{Kind: Total, Want: fmt.Sprintf("%s: %d%s", k, want, tol), Why: []string{"the report has no such total"}})
		case !isNum || err != nil:
			out = append(out, Problem{Kind: Total, Want: fmt.Sprintf("%s: %d%s", k, want, tol), Why: []string{"not a count: " + canonical(v)}})
		case !within(got, want):
			out = append(out, Problem{Kind: Total, Want: fmt.Sprintf("%s: %d%s", k, want, tol), Why: []string{fmt.Sprintf("%d in the capture", got)}})
		}
	}
	return out
}

// String is the expectation in one line: detector, severity and what it
// names.
func (e Finding) String() string {
	var b strings.Builder
	b.WriteString(e.Detector)
	switch {
	case e.SeverityMax == e.Severity:
		fmt.Fprintf(&b, " %s", e.Severity)
	case e.SeverityMax != "":
		fmt.Fprintf(&b, " %s to %s", e.Severity, e.SeverityMax)
	default:
		fmt.Fprintf(&b, " at %s or above", e.Severity)
	}
	var parts []string
	if len(e.Nodes) > 0 {
		parts = append(parts, fmt.Sprintf("nodes %v", e.Nodes))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		parts = append(parts, k+"="+canonical(e.Fields[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, e.Counts[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Approx)) {
		parts = append(parts, fmt.Sprintf("%s≈%g", k, e.Approx[k]))
	}
	if len(parts) > 0 {
		const most = 6
		if len(parts) > most {
			parts = append(parts[:most:most], fmt.Sprintf("and %d more", len(parts)-most))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	return b.String()
}

// Lines are the problems in words, one or two lines each, for a person:
// what was expected, what the capture has (the finding's summary) and
// how it differs. Strings from the report are as they are: the caller
// makes them safe for where it writes them.
func (r Result) Lines() []string {
	var out []string
	for _, p := range r.Problems {
		switch p.Kind {
		case Missing:
			out = append(out, "missing:    "+p.Want, "            no finding of that detector in the capture")
		case Mismatch:
			out = append(out, "mismatch:   "+p.Want,
				fmt.Sprintf("            nearest: %s %s: %s", p.Got.Severity, p.Got.Detector, p.Got.Summary),
				"            "+strings.Join(p.Why, "; "))
		case Unexpected:
			out = append(out, fmt.Sprintf("unexpected: %s %s: %s", p.Got.Severity, p.Got.Detector, p.Got.Summary),
				"            "+strings.Join(p.Why, "; "))
		default:
			out = append(out, fmt.Sprintf("%-11s %s: %s", p.Kind+":", p.Want, strings.Join(p.Why, "; ")))
		}
	}
	return out
}

// canonical is v as compact JSON with numbers by value: an integer as
// an integer, any other number as Go's shortest float.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return string(b)
	}
	b, err = json.Marshal(normalise(x))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func normalise(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return json.Number(strconv.FormatInt(int64(f), 10))
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return x
	case []any:
		for i := range x {
			x[i] = normalise(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = normalise(x[k])
		}
		return x
	}
	return v
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
