package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kfsniff/kfsniff/detectors"
)

// TestTextSummariesWrap: a long summary is printed whole, wrapped between
// words to 100 columns under its severity (What is wrong) and under its
// detector (Findings); a word longer than a line (an address) is never
// broken. It was cut at 256 runes with "…".
func TestTextSummariesWrap(t *testing.T) {
	long := "broker-1.example.internal:9092/" + strings.Repeat("x", 120)
	summary := strings.Repeat("the leader of orders-1 refused kgo (10.0.0.1:40001) again; ", 8) + long + " end of summary"
	r := &Report{Schema: Schema, Findings: []detectors.Finding{{Detector: "not-leader-loop", Severity: detectors.Warning, Summary: summary}}}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "…") {
		t.Errorf("summary cut:\n%s", out)
	}
	for _, section := range []string{"What is wrong", "Findings"} {
		i := strings.Index(out, section)
		if i < 0 {
			t.Fatalf("no %s section:\n%s", section, out)
		}
		var lines []string
		for _, l := range strings.Split(out[i:], "\n")[1:] {
			if l == "" || !strings.HasPrefix(l, "  ") {
				break
			}
			lines = append(lines, l)
		}
		if got := strings.Join(strings.Fields(strings.Join(lines, " ")), " "); !strings.Contains(got, strings.Join(strings.Fields(summary), " ")) {
			t.Errorf("%s: summary not whole:\n%s", section, strings.Join(lines, "\n"))
		}
		if len(lines) < 5 {
			t.Errorf("%s: %d lines, want the summary wrapped", section, len(lines))
		}
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "      ") {
				t.Errorf("%s: continuation %q not indented", section, l)
			}
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > proseWidth && !strings.Contains(l, long) {
				t.Errorf("%s: line of %d columns: %q", section, n, l)
			}
		}
	}
}
