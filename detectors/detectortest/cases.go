package detectortest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
)

// Case is one specification of a rule: traffic, the rule's settings, and
// the findings it must give (none: it must stay quiet); of every finding,
// where set, its node ids and strings its explanation and next steps
// contain. End, if set, is when the capture goes on to (another client's
// exchange then), for rules that judge what was still going at the end.
type Case struct {
	Name        string
	Settings    map[string]string
	Traffic     func(h *Harness)
	End         time.Duration
	Want        []Want
	Nodes       []int32
	Explanation []string
	Next        []string
}

// Run runs each case as a subtest on a fresh harness of analyzer a and
// checks its findings (Check, then Nodes, Explanation, Next); also, if
// set, is called with every finding of a case, for what all of a rule's
// findings must show.
func Run(t *testing.T, a *detectors.Analyzer, cases []Case, also func(t *testing.T, f *detectors.Finding)) {
	t.Helper()
	cleanup := owned(t, len(cases))
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			cleanup.ran++
			h := New(t, map[string]map[string]string{a.Name: tc.Settings}, a)
			tc.Traffic(h)
			if tc.End > 0 {
				h.EndAt(tc.End)
			}
			fs := h.Findings()
			Check(t, fs, a.Name, tc.Want...)
			for i := range fs {
				f := &fs[i]
				if f.Detector != a.Name {
					continue
				}
				if tc.Nodes != nil && !slices.Equal(f.Nodes, tc.Nodes) {
					t.Errorf("%s: nodes %v, want %v", a.Name, f.Nodes, tc.Nodes)
				}
				for _, s := range tc.Explanation {
					if !strings.Contains(f.Explanation, s) {
						t.Errorf("%s: explanation %q lacks %q", a.Name, f.Explanation, s)
					}
				}
				for _, s := range tc.Next {
					if !strings.Contains(f.Next, s) {
						t.Errorf("%s: next %q lacks %q", a.Name, f.Next, s)
					}
				}
				if also != nil {
					also(t, f)
				}
			}
		})
	}
}

// EndAt makes the capture go on to T0+d: an exchange of a client of its
// own, on a connection of its own, answered 1 ms later.
func (h *Harness) EndAt(d time.Duration) {
	c := h.Conn("10.9.0.1:40000", "10.1.0.11:9092")
	h.Call(c, At(d), time.Millisecond, "other", Fetch(500), Fetched(0, 0))
}
