package detectors_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// many is a rule that finds what it is told: n findings, the i-th at
// second i, every tenth an error (the rest warnings); with own, it keeps
// at most Pass.MaxFindings itself and returns the summary of the rest.
type many struct {
	n   int
	own bool
}

type manyParams struct {
	N   int  `param:"n" doc:"findings"`
	Own bool `param:"own" doc:"bound them itself"`
}

var t0 = time.Date(2024, 5, 6, 14, 0, 0, 0, time.UTC)

func (m *many) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	var cut detectors.NotListed
	for i := range m.n {
		f := detectors.Finding{Severity: detectors.Warning, Summary: fmt.Sprint("finding ", i),
			First: t0.Add(time.Duration(i) * time.Second), Conns: []int{i}}
		if i%10 == 9 {
			f.Severity = detectors.Error
		}
		if m.own && p.MaxFindings > 0 && len(out) >= p.MaxFindings {
			cut.Add(&f)
			continue
		}
		out = append(out, f)
	}
	return append(out, cut.Summary()...)
}

func manyAnalyzer(name string) *detectors.Analyzer {
	return detectors.Define(detectors.Analyzer{Name: name, Doc: "test", Severity: detectors.Error}, manyParams{},
		func(p manyParams) detectors.Rule { return &many{n: p.N, own: p.Own} })
}

// TestSetLimits: past the limits the findings are counted, not listed,
// the most severe and earliest kept; one summary per rule cut says how
// many more, as severe as the worst of them; Cut counts them.
func TestSetLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         [2]int // findings of rule a, b
		own       bool
		limits    detectors.Limits
		listed    [2]int
		notListed [2]int64
		worst     [2]detectors.Severity
	}{
		{name: "within", n: [2]int{5, 5}, limits: detectors.Limits{PerRule: 5, Total: 10}, listed: [2]int{5, 5}},
		{name: "per rule", n: [2]int{30, 5}, limits: detectors.Limits{PerRule: 10, Total: 100},
			listed: [2]int{10, 5}, notListed: [2]int64{20, 0}, worst: [2]detectors.Severity{detectors.Warning}},
		{name: "per rule by the rule", n: [2]int{30, 5}, own: true, limits: detectors.Limits{PerRule: 10, Total: 100},
			listed: [2]int{10, 5}, notListed: [2]int64{20, 0}, worst: [2]detectors.Severity{detectors.Error}},
		{name: "total", n: [2]int{8, 8}, limits: detectors.Limits{PerRule: 8, Total: 10},
			listed: [2]int{5, 5}, notListed: [2]int64{3, 3}, worst: [2]detectors.Severity{detectors.Warning, detectors.Warning}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := detectors.NewSet([]*detectors.Analyzer{manyAnalyzer("a"), manyAnalyzer("b")}, map[string]map[string]string{
				"a": {"n": fmt.Sprint(tc.n[0]), "own": fmt.Sprint(tc.own)}, "b": {"n": fmt.Sprint(tc.n[1])}})
			if err != nil {
				t.Fatal(err)
			}
			set.SetLimits(tc.limits)
			fs := set.Findings(detectors.Pass{})
			listed := [2]int{}
			summaries := map[string]detectors.Finding{}
			for _, f := range fs {
				if f.Fields["not_listed"] == true {
					summaries[f.Detector] = f
					continue
				}
				listed[f.Detector[0]-'a']++
			}
			if listed != tc.listed {
				t.Errorf("listed %v, want %v", listed, tc.listed)
			}
			var total int64
			for i, name := range []string{"a", "b"} {
				s, ok := summaries[name]
				if ok != (tc.notListed[i] > 0) || s.Counts["not_listed"] != tc.notListed[i] {
					t.Errorf("%s: summary %v %v, want %d not listed", name, ok, s.Counts, tc.notListed[i])
					continue
				}
				total += tc.notListed[i]
				if ok && s.Severity != tc.worst[i] {
					t.Errorf("%s: summary is %v, want %v (%s)", name, s.Severity, tc.worst[i], s.Summary)
				}
			}
			if got := set.Cut()["findings_not_listed"]; got != total {
				t.Errorf("Cut says %d not listed, want %d", got, total)
			}
			// The errors are listed first: a rule of 30 with 3 errors
			// cut to 10 by the Set keeps all 3.
			if tc.name == "per rule" {
				errs := 0
				for _, f := range fs {
					if f.Detector == "a" && f.Severity == detectors.Error && f.Fields["not_listed"] == nil {
						errs++
					}
				}
				if errs != 3 {
					t.Errorf("%d errors of rule a listed, want all 3", errs)
				}
			}
		})
	}
}
