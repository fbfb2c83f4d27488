package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/termcheck"
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

// TestLagText: the Lag section names consumers with their group or
// "unknown group", followers by node, and escapes wire strings.
func TestLagText(t *testing.T) {
	pt := func(lag int64) LagPoint {
		return LagPoint{Time: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC), Packet: 9, FetchOffset: 100, HighWatermark: 100 + lag, Lag: lag}
	}
	node := int32(3)
	r := &Report{Schema: Schema, Lag: []Lag{
		{Role: "consumer", Groups: []string{"grp\x1b[2J"}, ClientID: "app\x07", Client: "10.0.0.5", Server: "10.0.0.1:9092",
			Topic: "orders\x1b]0;x", Partition: 2, Samples: 3, First: pt(0), Last: pt(40), Min: pt(0), Max: pt(40),
			Points: []LagPoint{pt(0), pt(20), pt(40)}},
		{Role: "consumer", Groups: []string{}, ClientID: "other", Client: "10.0.0.6", Server: "10.0.0.1:9092", Topic: "orders",
			Samples: 1, First: pt(5), Last: pt(5), Min: pt(5), Max: pt(5), Points: []LagPoint{pt(5)}},
		{Role: "replication", ReplicaNode: &node, Groups: []string{}, ClientID: "broker-3-fetcher-0", Client: "10.0.0.3",
			Server: "10.0.0.1:9092", Topic: "orders", Samples: 2, First: pt(700), Last: pt(900), Min: pt(700), Max: pt(900),
			Points: []LagPoint{pt(700), pt(900)}},
	}}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	if err := termcheck.Safe(b.Bytes()); err != nil {
		t.Error(err)
	}
	out := b.String()
	for _, want := range []string{
		// Quoted as the connections quote client ids: Clean, then %q.
		`consumer "app\\x07" 10.0.0.5`, `"grp\\x1b[2J"`, `orders\x1b]0;x-2`, "0 20 40 (10:00:00.0..10:00:00.0)",
		"unknown group", `follower node 3 ("broker-3-fetcher-0" 10.0.0.3)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lag section lacks %q:\n%s", want, out)
		}
	}
}
