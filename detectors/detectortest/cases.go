package detectortest

import (
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// Case is one specification of a rule: traffic, the rule's settings, and
// the findings it must give (none: it must stay quiet).
type Case struct {
	Name     string
	Settings map[string]string
	Traffic  func(h *Harness)
	Want     []Want
}

// Run runs each case as a subtest on a fresh harness of analyzer a and
// checks its findings (Check); also, if set, is called with every finding
// of a case, for what all of a rule's findings must show.
func Run(t *testing.T, a *detectors.Analyzer, cases []Case, also func(t *testing.T, f *detectors.Finding)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			h := New(t, map[string]map[string]string{a.Name: tc.Settings}, a)
			tc.Traffic(h)
			fs := h.Findings()
			Check(t, fs, a.Name, tc.Want...)
			for i := range fs {
				if also != nil && fs[i].Detector == a.Name {
					also(t, &fs[i])
				}
			}
		})
	}
}
