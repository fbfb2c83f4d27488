package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// TestMaxFindings: --max-findings-per-rule and --max-findings cut the
// findings listed, a summary finding per rule counts the rest as severe as
// the worst of them (so --fail-on still fails), bounds_reached says how
// many; a limit below 1 is a usage error.
func TestMaxFindings(t *testing.T) {
	path := fixture(filepath.Join(gen.HostileDir, "hostile-strings.pcap")) // 7 throttled warnings, 1 error-storm info
	code, out, errs := kfsniff(t, "-r", path, "--json", "--max-findings-per-rule", "2", "--fail-on", "warning")
	if code != exitFindings {
		t.Fatalf("exit %d (stderr %q), want %d: the warnings not listed still count for --fail-on", code, errs, exitFindings)
	}
	var r struct {
		Totals struct {
			BoundsReached map[string]int64 `json:"bounds_reached"`
		}
		Findings []struct {
			Detector, Severity, Summary string
			Counts                      map[string]int64
			Fields                      map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	listed, summaries := map[string]int{}, 0
	for _, f := range r.Findings {
		if f.Fields["not_listed"] == true {
			summaries++
			if f.Detector != "throttled" || f.Severity != "warning" || f.Counts["not_listed"] != 5 ||
				!strings.HasPrefix(f.Summary, "5 more throttled findings not listed") {
				t.Errorf("summary %s %s %v: %q; want throttled's 5 more warnings", f.Detector, f.Severity, f.Counts, f.Summary)
			}
			continue
		}
		listed[f.Detector]++
	}
	if listed["throttled"] != 2 || listed["error-storm"] != 1 || summaries != 1 || r.Totals.BoundsReached["findings_not_listed"] != 5 {
		t.Errorf("listed %v, %d summaries, bounds reached %v; want 2 throttled, 1 error-storm, one summary of 5", listed, summaries, r.Totals.BoundsReached)
	}

	code, out, _ = kfsniff(t, "-r", path, "--max-findings", "1")
	if code != exitOK || !strings.Contains(out, "more throttled findings not listed") || !strings.Contains(out, "findings_not_listed=7") {
		t.Errorf("--max-findings 1: exit %d, report:\n%.1500s", code, out)
	}

	for _, args := range [][]string{{"--max-findings", "0"}, {"--max-findings-per-rule", "-1"}} {
		code, _, errs := kfsniff(t, append([]string{"-r", path}, args...)...)
		if code != exitUsage || !strings.HasPrefix(errs, "kfsniff: ") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errs)
		}
	}
}
