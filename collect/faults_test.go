package collect

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// TestPacketFaultsPlaced: undecodable packets and kfsniff's own faults met
// outside any connection are counted and the first of each placed, with
// its packet, in JSON and text (escaped); none gives no place.
func TestPacketFaultsPlaced(t *testing.T) {
	st := &flows.Stats{BadPackets: 2, FirstBad: flows.Problem{File: 0, Packet: 17, What: "truncated IPv4 header"},
		InternalErrors: 3, FirstInternal: flows.Problem{File: 1, Packet: 42, What: "internal error: \x1b[2J boom"}}
	r := NewCollector().Build([]report.File{{Name: "a.pcap"}, {Name: "b.pcap"}}, st, nil, nil, nil)
	b, err := json.Marshal(r.Totals)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"bad_packets":2`, `"first_bad_packet":{"file":0,"packet":17,"what":"truncated IPv4 header"}`,
		`"internal_errors":3`, `"first_internal_error":{"file":1,"packet":42,`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON totals lack %s: %s", want, b)
		}
	}
	var text strings.Builder
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 undecodable packets (first: packet 17: truncated IPv4 header)",
		"3 internal errors (kfsniff bugs", "first outside any connection: packet", `\x1b[2J boom`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "\x1b") {
		t.Errorf("text carries a raw escape")
	}
	none := NewCollector().Build(nil, &flows.Stats{}, nil, nil, nil)
	if none.Totals.FirstBadPacket != nil || none.Totals.FirstInternalError != nil {
		t.Errorf("places without faults: %+v %+v", none.Totals.FirstBadPacket, none.Totals.FirstInternalError)
	}
}
