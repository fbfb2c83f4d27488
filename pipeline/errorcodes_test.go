package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/report"
)

// TestErrorCodeTableRecordings reads docs/detectors.md's error-code table
// and, for each row naming a recording, runs every rule on it and checks
// that the row's rule reports at the row's severity.
func TestErrorCodeTableRecordings(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "detectors.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Error codes")
	if !ok {
		t.Fatal("docs/detectors.md has no error-code table")
	}
	reports := map[string]*report.Report{}
	checked := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 8 || !strings.HasPrefix(strings.TrimSpace(cells[5]), "`") {
			continue
		}
		code, name, rule := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])
		path := strings.Trim(strings.TrimSpace(cells[5]), "`")
		sev := strings.TrimSpace(cells[6])
		checked++
		t.Run(code+"-"+name, func(t *testing.T) {
			r := reports[path]
			if r == nil {
				r = analyseWithDetectors(t, filepath.Join("..", path))
				reports[path] = r
			}
			for _, f := range r.Findings {
				if f.Detector == rule && f.Severity.String() == sev {
					return
				}
			}
			t.Errorf("%s (%s): no %s %s finding on %s:%s", name, code, sev, rule, path, describe(r.Findings))
		})
	}
	if checked < 15 {
		t.Errorf("%d rows with a recording checked", checked)
	}
}
