package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/internal/termcheck"
)

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
