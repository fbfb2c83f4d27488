package pipeline

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
)

// panicky is a handler that panics on one connection's third request, as
// a decoder or detector bug met by hostile input would.
type panicky struct{ seen map[int]int }

func (p *panicky) OnRequest(m *flows.Message) {
	p.seen[m.Conn.ID]++
	if m.Conn.ID == 1 && p.seen[1] == 3 {
		panic("forced for the test")
	}
}

// TestPanicIsolatedToOneConnection: a panic while handling one connection
// abandons that connection only, with its packet number; the rest of the
// capture is analysed and the report carries an internal-error finding.
// With one worker the handler's panic stops flows on that connection too;
// with several, handlers run apart from flows, so the connection's events
// stop reaching the handlers while its counters run on.
func TestPanicIsolatedToOneConnection(t *testing.T) {
	path := filepath.Join("..", "fixtures", "pcaps", "vlan.pcap") // two connections, 9 exchanges each
	r := analyseWithDetectors(t, path)
	if r.Totals.Requests != 18 {
		t.Fatalf("baseline: %d requests", r.Totals.Requests)
	}
	for _, workers := range []int{1, 2} {
		h := &panicky{seen: map[int]int{}}
		r = runFileOn(t, path, workers, h)
		wantReq := 3
		if workers > 1 {
			wantReq = 9
		}
		for _, c := range r.Connections {
			switch c.ID {
			case 1:
				if c.Requests != wantReq || len(c.Problems) == 0 || !strings.Contains(c.Problems[len(c.Problems)-1].What, "internal error") || c.Problems[len(c.Problems)-1].Packet == 0 {
					t.Errorf("%d workers: connection 1: %d requests, problems %+v; want abandoned at its 3rd request with the packet number", workers, c.Requests, c.Problems)
				}
			case 2:
				if c.Requests != 9 || c.Responses != 9 {
					t.Errorf("%d workers: connection 2: %d requests %d responses; the other connection must be analysed in full", workers, c.Requests, c.Responses)
				}
			}
		}
		if h.seen[1] != 3 || h.seen[2] != 9 {
			t.Errorf("%d workers: handler saw %v requests by connection; want 3 of the abandoned one, 9 of the other", workers, h.seen)
		}
		var found bool
		for _, f := range r.Findings {
			if f.Detector == "internal-error" && f.Severity == detectors.Error && len(f.Evidence) == 1 && f.Evidence[0].Packet > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("%d workers: no internal-error finding:%s", workers, describe(r.Findings))
		}
	}
}
