package report_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kfsniff/kfsniff/report"
)

// TestSafeEncoderReports: on the report of every golden capture (maps,
// embedded structs, omitempty, times, severities, findings' fields), the
// fallback writes what encoding/json writes.
func TestSafeEncoderReports(t *testing.T) {
	n := 0
	for _, c := range goldenCases(t, false) {
		_, rep := analyse(t, c, 1)
		if rep == nil {
			continue
		}
		n++
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			continue // time-range.pcapng: jsonsafe_test.go tests what the fallback does then
		}
		got, issues := report.Walk(rep)
		if !bytes.Equal(got, want.Bytes()) || issues != nil {
			i := 0
			for i < len(got) && i < want.Len() && got[i] == want.Bytes()[i] {
				i++
			}
			t.Errorf("%s: the fallback differs at byte %d (issues %v):\n got ...%.200s\nwant ...%.200s", c.capture, i, issues, got[max(0, i-100):], want.Bytes()[max(0, i-100):])
		}
	}
	if n < 10 {
		t.Fatalf("only %d reports compared", n)
	}
}
