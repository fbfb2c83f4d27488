package collect

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/flows"
)

// TestLagTrack: whatever the number of samples, a series keeps its first,
// last, least and most lag, and at most LagPoints more points spread
// evenly over the samples, in order, the last one included.
func TestLagTrack(t *testing.T) {
	for _, n := range []int{1, 2, 7, 8, 9, 100, 1000, 4097} {
		var tr LagTrack
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var most, least uint64 // packets of the most and least lag
		for i := range n {
			lag := 1 + int64((i*7919)%1000)
			switch i {
			case n / 3:
				lag, most = 5000, uint64(i+1)
			case n / 2:
				lag, least = 0, uint64(i+1)
			}
			tr.Add(flows.LagPoint{Time: t0.Add(time.Duration(i) * time.Second), Packet: uint64(i + 1), Lag: lag})
		}
		pts := tr.Points()
		if tr.First.Packet != 1 || tr.Last.Packet != uint64(n) || n > 2 && (tr.Max.Packet != most || tr.Min.Packet != least) {
			t.Errorf("%d samples: first %d last %d, most at %d, least at %d: want 1, %d, %d, %d", n, tr.First.Packet,
				tr.Last.Packet, tr.Max.Packet, tr.Min.Packet, n, most, least)
		}
		if len(pts) > LagPoints+1 || len(pts) < min(n, LagPoints/2) || pts[0].Packet != 1 || pts[len(pts)-1].Packet != uint64(n) {
			t.Fatalf("%d samples: %d points from packet %d to %d", n, len(pts), pts[0].Packet, pts[len(pts)-1].Packet)
		}
		// Evenly spread: the gaps between kept samples (the last aside)
		// are all equal.
		for i := 2; i < len(pts)-1; i++ {
			if pts[i].Packet-pts[i-1].Packet != pts[1].Packet-pts[0].Packet {
				t.Errorf("%d samples: points at packets %v not evenly spread", n, packets(pts))
				break
			}
		}
	}
}

func packets(pts []flows.LagPoint) []uint64 {
	out := make([]uint64, len(pts))
	for i, p := range pts {
		out[i] = p.Packet
	}
	return out
}
