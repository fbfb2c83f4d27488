package collect

import (
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// TestFindingSpanningALoss: a finding whose span overlaps the gaps of one
// of its connections says so, in JSON and text; one on a connection whose
// gaps are outside its span, or on another connection, does not.
func TestFindingSpanningALoss(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	lossy := &flows.Conn{ConnInfo: flows.ConnInfo{ID: 3}, Gaps: 2, Lost: [2]int64{1460, 2920},
		FirstGap: flows.Place{Packet: 120, Time: at(10)}, LastGap: flows.Place{Packet: 340, Time: at(20)}}
	clean := &flows.Conn{ConnInfo: flows.ConnInfo{ID: 4}}
	findings := []detectors.Finding{
		{Detector: "a", Summary: "over the loss", First: at(5), Last: at(15), Conns: []int{3, 4}},
		{Detector: "b", Summary: "before the loss", First: at(1), Last: at(9), Conns: []int{3}},
		{Detector: "c", Summary: "clean connection", First: at(5), Last: at(15), Conns: []int{4}},
		{Detector: "d", Summary: "after the first gap", First: at(19), Last: at(30), Conns: []int{3}},
	}
	r := NewCollector().Build(nil, &flows.Stats{}, []*flows.Conn{lossy, clean}, nil, findings)
	want := map[string]bool{"a": true, "b": false, "c": false, "d": true}
	for _, f := range r.Findings {
		if got := f.CaptureLoss != nil; got != want[f.Detector] {
			t.Errorf("%s: capture loss %+v, want noted %v", f.Summary, f.CaptureLoss, want[f.Detector])
			continue
		}
		if l := f.CaptureLoss; l != nil && (len(l.Conns) != 1 || l.Conns[0] != 3 || l.Gaps != 2 || l.Bytes != 4380) {
			t.Errorf("%s: capture loss %+v, want connection 3, 2 gaps, 4380 bytes", f.Summary, l)
		}
	}
	var b strings.Builder
	if err := report.WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "capture loss: 2 gaps (4.3 KiB lost) on connection #3"); n != 2 {
		t.Errorf("text report says the loss %d times, want 2:\n%s", n, b.String())
	}
}
