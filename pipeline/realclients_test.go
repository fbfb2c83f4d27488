package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/report"
)

// TestRulesRecordedFromRealClients holds every rule to what docs/detectors.md says of
// it: the captures of real clients it names (Analyzer.Recorded) exist and
// the rule finds something in each, at the defaults; a rule without one
// says why (Analyzer.NotRecorded).
func TestRulesRecordedFromRealClients(t *testing.T) {
	reports := map[string]*report.Report{}
	for _, a := range all.Analyzers() {
		switch {
		case len(a.Recorded) == 0 && a.NotRecorded == "":
			t.Errorf("%s: names no capture of real clients and does not say why", a.Name)
		case len(a.Recorded) > 0 && a.NotRecorded != "":
			t.Errorf("%s: names captures and says it has none", a.Name)
		}
		for _, path := range a.Recorded {
			if !strings.HasPrefix(path, "fixtures/pcaps/") {
				t.Errorf("%s: %s is not a committed capture", a.Name, path)
				continue
			}
			r := reports[path]
			if r == nil {
				full := filepath.Join("..", path)
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s: %v", a.Name, err)
					continue
				}
				r = analyseWithDetectors(t, full)
				reports[path] = r
			}
			found := false
			for _, f := range r.Findings {
				found = found || f.Detector == a.Name
			}
			if !found {
				t.Errorf("%s: no finding on %s", a.Name, path)
			}
		}
	}
}
