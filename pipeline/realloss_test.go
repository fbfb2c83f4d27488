package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRealLossyMidstreamCapture: a real tcpdump capture of kgo against
// kfake that begins mid-connection and lost 1722 of 3042 packets in the
// kernel (fixtures/pcaps/real, made by fixtures/record/lossy-tcpdump.sh):
// no connection the wrong way round, no framing or decode error, and per
// API and version at least the requests tshark finds in it and no API
// tshark does not see (kfsniff finds more Produce: tshark stops at lost
// segments). Before issue 10 kfsniff inverted a connection, invented six
// "Produce v0" and found 16 Fetch of tshark's 30.
func TestRealLossyMidstreamCapture(t *testing.T) {
	dir := filepath.Join("..", "fixtures", "pcaps", "real")
	var side struct {
		TsharkRequests map[string]int64 `json:"tshark_requests"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "lossy-midstream-tcpdump.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &side); err != nil || len(side.TsharkRequests) == 0 {
		t.Fatalf("sidecar: %v", err)
	}
	r := runFile(t, filepath.Join(dir, "lossy-midstream-tcpdump.pcap.gz"))
	tot := r.Totals
	if tot.FramingErrors != 0 || tot.DecodeErrors != 0 {
		t.Errorf("framing errors %d, decode errors %d; want none", tot.FramingErrors, tot.DecodeErrors)
	}
	if tot.Gaps == 0 {
		t.Errorf("no gaps in a capture that lost most of its packets")
	}
	for _, c := range r.Connections {
		if p := c.Client[len(c.Client)-4:]; p == "9092" || p == "9093" || p == "9094" {
			t.Errorf("connection %d shown as %s -> %s (client by %s): the broker as client", c.ID, c.Client, c.Server, c.ClientBy)
		}
	}
	got := map[string]int64{}
	for _, a := range r.APIs {
		if a.Requests > 0 {
			got[fmt.Sprintf("%dv%d", a.Key, a.Version)] = a.Requests
		}
	}
	for k, n := range side.TsharkRequests {
		if got[k] < n {
			t.Errorf("%s: %d requests, tshark finds %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := side.TsharkRequests[k]; !ok {
			t.Errorf("%s: %d requests of an API and version tshark does not see in the capture", k, n)
		}
	}
}
