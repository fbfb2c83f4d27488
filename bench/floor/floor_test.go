package floor_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/bench/floor"
	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// TestAgreesWithAnalyzer: on every committed capture, the floor reads as
// many packets, and decodes as many of them to TCP, as the analysis does,
// so that the floor is the same reading work without the rest.
func TestAgreesWithAnalyzer(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/pcaps/*.pcap*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			r, err := floor.Read(name)
			if err != nil {
				t.Fatal(err)
			}
			f, err := capture.Open(name, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig()})
			st := res.Stats
			// Datagrams reassembled from IP fragments are TCP packets to
			// the analyzer; the floor does not reassemble (none of the
			// fixtures' datagrams carries anything but TCP).
			if r.Packets != st.Packets || r.TCP != st.TCPPackets-st.Reassembled || r.Bad != st.BadPackets {
				t.Errorf("floor: %d packets, %d TCP, %d bad; analyzer: %d, %d (%d of them reassembled from fragments), %d",
					r.Packets, r.TCP, r.Bad, st.Packets, st.TCPPackets, st.Reassembled, st.BadPackets)
			}
			if r.TCP == 0 {
				t.Error("no TCP packets")
			}
		})
	}
}
