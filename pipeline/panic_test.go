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
func TestPanicIsolatedToOneConnection(t *testing.T) {
	path := filepath.Join("..", "fixtures", "pcaps", "vlan.pcap") // two connections, 9 exchanges each
	r := analyseWithDetectors(t, path)
	if r.Totals.Requests != 18 {
		t.Fatalf("baseline: %d requests", r.Totals.Requests)
	}
	h := &panicky{seen: map[int]int{}}
	r = runFileWithDetectors(t, path, h)
	for _, c := range r.Connections {
		switch c.ID {
		case 1:
			if c.Requests != 3 || len(c.Problems) == 0 || !strings.Contains(c.Problems[len(c.Problems)-1].What, "internal error") || c.Problems[len(c.Problems)-1].Packet == 0 {
				t.Errorf("connection 1: %d requests, problems %+v; want abandoned at its 3rd request with the packet number", c.Requests, c.Problems)
			}
		case 2:
			if c.Requests != 9 || c.Responses != 9 {
				t.Errorf("connection 2: %d requests %d responses; the other connection must be analysed in full", c.Requests, c.Responses)
			}
		}
	}
	var found bool
	for _, f := range r.Findings {
		if f.Detector == "internal-error" && f.Severity == detectors.Error && len(f.Evidence) == 1 && f.Evidence[0].Packet > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no internal-error finding:%s", describe(r.Findings))
	}
}
