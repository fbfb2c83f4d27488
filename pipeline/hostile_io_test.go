package pipeline

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/report"
)

// The outcomes of issue 16's inputs for items 2-4 (fixtures/gen/hostile_io.go),
// added to hostileCases here so that the corpus table stays one map.
func init() {
	hostileCases["tui-tags.pcap"] = hostileCase{
		check: func(t *testing.T, r *report.Report) {
			n := len(gen.TagStrings) + 1
			wantTotals(t, r, totals{conns: n, requests: int64(7 * n), responses: int64(7 * n)})
			ids := map[string]bool{}
			for _, c := range r.Connections {
				for _, id := range c.ClientIDs {
					ids[id] = true
				}
			}
			for _, s := range gen.TagStrings {
				if !ids[s] && !bytes.ContainsRune([]byte(s), 0xfffd) && !bytes.Contains([]byte(s), []byte{0xff}) {
					t.Errorf("client id %q missing from the report", s)
				}
			}
			if len(r.Lag) != n {
				t.Errorf("%d lag series, want one per client (%d)", len(r.Lag), n)
			}
		},
		checkOut: func(t *testing.T, out *outputs) {
			// Quoted once: the connection list and the summary lines agree.
			for _, want := range []string{`client-id "[\"region1\"]region"`, `client "[\"region1\"]region" throttled`} {
				if !bytes.Contains(out.text, []byte(want)) {
					t.Errorf("text report lacks %s", want)
				}
			}
			if bytes.Contains(out.text, []byte(`[\\"region1`)) {
				t.Error(`text report escapes ["region1"] twice`)
			}
		},
	}
	hostileCases["nan-quotas.pcap"] = hostileCase{
		check: func(t *testing.T, r *report.Report) {
			wantTotals(t, r, totals{conns: 1, requests: 5, responses: 5})
		},
		checkOut: func(t *testing.T, out *outputs) {
			for _, want := range []string{"Value: NaN\n", "Value: +Inf\n", "Value: -Inf\n", "Value: 1048576\n"} {
				if !bytes.Contains(out.verbose, []byte(want)) {
					t.Errorf("--frames -v lacks %s", want)
				}
			}
		},
	}
	hostileCases["time-range.pcapng"] = hostileCase{
		check: func(t *testing.T, r *report.Report) {
			wantTotals(t, r, totals{conns: 2, requests: 18, responses: 18})
			if y := r.Capture.Last.Year(); y != 11530 {
				t.Errorf("last packet in year %d, want 11530 (the analysis keeps the time; only JSON clamps it)", y)
			}
			var b bytes.Buffer
			var issues []report.JSONIssue
			if err := report.WriteJSONWarn(&b, r, func(i report.JSONIssue) { issues = append(issues, i) }); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Capture struct{ First, Last time.Time }
			}
			if err := json.Unmarshal(b.Bytes(), &doc); err != nil || doc.Capture.Last.Year() != 9999 || doc.Capture.First.Year() != 0 {
				t.Errorf("JSON capture %+v (%v): want the times clamped to years 0 and 9999", doc.Capture, err)
			}
			if len(issues) < 4 {
				t.Errorf("%d values reported clamped, want every out-of-range time (%v)", len(issues), issues)
			}
		},
	}
}
