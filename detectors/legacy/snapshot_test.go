package legacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
)

// snapEvery takes the set's findings as they stand after every exchange
// (it comes after the set among the handlers, so it sees each exchange's
// effect at once).
type snapEvery struct {
	set   *detectors.Set
	conns []*flows.Conn
	end   time.Time
	seen  []int // unanswered-requests findings per snapshot
}

func (s *snapEvery) OnExchange(x *flows.Exchange) {
	s.conns = append(s.conns, x.Conn)
	if x.Resp != nil && x.Resp.Time.After(s.end) {
		s.end = x.Resp.Time
	}
	fs := s.set.Snapshot(detectors.Pass{Nodes: &flows.Nodes{}, Conns: s.conns, End: s.end})
	s.seen = append(s.seen, len(opsOf(fs, "unanswered-requests")))
}

// TestSnapshotUnanswered: Findings settles the requests still open into
// the groups; Snapshot must not, or the final findings would count them
// differently. Here a request is reported unanswered when the response to
// the next one arrives: a snapshot between the two sees it open (in
// flight), the final findings overtaken (a warning).
func TestSnapshotUnanswered(t *testing.T) {
	pcap := opsCapture(t, func(tl *opsTimeline) {
		p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
		p.call(opsAt(time.Second), 0, opsProduce(9), nil)
		p.call(opsAt(time.Second+opsMs(500)), opsMs(2), opsProduce(9), opsProduced(9, 0, 0))
		opsPinger(tl, 6*time.Second)
	})
	run := func(snap bool) ([]detectors.Finding, *snapEvery) {
		f, err := capture.NewFile("test.pcap", 0, bytes.NewReader(pcap))
		if err != nil {
			t.Fatal(err)
		}
		set, err := detectors.NewSet(all.Analyzers(), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := &snapEvery{set: set}
		hs := []flows.Handler{set}
		if snap {
			hs = append(hs, h)
		}
		res := pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Handlers: hs})
		st := res.Stats
		return set.Findings(detectors.Pass{Nodes: res.Nodes, Conns: res.Conns, Start: st.FirstTime, End: st.LastTime}), h
	}
	want, _ := run(false)
	if u := opsOf(want, "unanswered-requests"); len(u) != 1 || u[0].Severity != detectors.Warning {
		t.Fatalf("want one unanswered-requests warning:%s", opsDescribe(want))
	}
	got, h := run(true)
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !bytes.Equal(w, g) {
		t.Fatalf("with snapshots:%s\nwithout:%s", opsDescribe(got), opsDescribe(want))
	}
	some := false
	for _, n := range h.seen {
		some = some || n > 0
	}
	if !some {
		t.Errorf("no snapshot shows the unanswered request: %v", h.seen)
	}
}
