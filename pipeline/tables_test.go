package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/metrics"
)

// TestProgressCarriesTables: a live source on one analyzer hands the
// analyzer's tables to Progress (the soak's kfsniff_table_size): at the end
// the connections table holds what the report lists, every table has the
// configured bound, and the metrics gauges take them.
func TestProgressCarriesTables(t *testing.T) {
	cfg := flows.DefaultConfig()
	cfg.MaxConns = 3
	m := metrics.New(metrics.Config{Live: true})
	var last Progress
	res := RunSource(context.Background(), &fakeLive{f: openFixture(t, "basic.pcap"), forget: true}, Options{
		Flows: cfg, Handlers: []flows.Handler{m}, Duration: 300 * time.Millisecond,
		Progress:      func(p Progress) { last = p; m.Tables(p.Tables) },
		ProgressEvery: time.Millisecond,
	})
	if !last.Done || last.Tables == nil {
		t.Fatalf("last progress %+v: want the tables at the end", last)
	}
	got := map[string]flows.Table{}
	for _, tb := range last.Tables {
		got[tb.Name] = tb
	}
	want := map[string]int64{"connections": 3, "streams": int64(cfg.MaxStreams), "waiting_requests": int64(cfg.MaxPendingTotal), "buffered_bytes": int64(cfg.BufferBudget)}
	for name, bound := range want {
		if got[name].Bound != bound {
			t.Errorf("table %s: bound %d, want %d", name, got[name].Bound, bound)
		}
	}
	if n := got["connections"].Size; n != int64(len(res.Conns)) || n > 3 {
		t.Errorf("connections table %d, the report lists %d (bound 3)", n, len(res.Conns))
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fams {
		if f.GetName() != "kfsniff_table_size" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == "connections" {
					seen++
					if v := mt.GetGauge().GetValue(); v != float64(got["connections"].Size) {
						t.Errorf("kfsniff_table_size{table=connections} %v, want %d", v, got["connections"].Size)
					}
				}
			}
		}
	}
	if seen != 1 {
		t.Errorf("kfsniff_table_size{table=connections} found %d times", seen)
	}
}
