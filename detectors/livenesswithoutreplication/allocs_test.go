package livenesswithoutreplication_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/livenesswithoutreplication"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestHealthyKRaftDoesNotAllocate: a healthy broker's heartbeats and raft
// fetches, answered, cost the rule no allocation once warmed up (the
// heartbeat evidence is kept as a value and formatted only if listed).
func TestHealthyKRaftDoesNotAllocate(t *testing.T) {
	const warm, runs = 3000, 1000
	set, err := detectors.NewSet([]*detectors.Analyzer{livenesswithoutreplication.Analyzer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hbc := flows.MakeConn(netip.MustParseAddrPort("10.4.0.5:42000"), netip.MustParseAddrPort("10.4.0.9:9093"))
	rc := flows.MakeConn(netip.MustParseAddrPort("10.4.0.5:42001"), netip.MustParseAddrPort("10.4.0.9:9093"))
	hbc.ID, rc.ID = 1, 2
	var xs []flows.Exchange
	for i := range warm + runs + 1 {
		at := dt.At(time.Duration(i) * 250 * time.Millisecond)
		req, resp := dt.BrokerHeartbeat(5, int64(4000+i), 0)
		q := flowstest.MakeRequest(hbc, at, int32(i), "5", req)
		xs = append(xs, flows.Exchange{Conn: hbc, Req: q, Resp: flowstest.MakeResponse(q, at.Add(time.Millisecond), resp)})
		f := flowstest.MakeRequest(rc, at, int32(i), "raft-client-5", dt.RaftFetch(5, int64(4000+i), 8))
		xs = append(xs, flows.Exchange{Conn: rc, Req: f, Resp: flowstest.MakeResponse(f, at.Add(time.Millisecond), dt.RaftFetched(0, int64(4001+i), -1, -1, "", 0, nil))})
	}
	i := 0
	step := func() {
		set.OnExchange(&xs[i])
		set.OnExchange(&xs[i+1])
		i += 2
	}
	for range warm {
		step()
	}
	if allocs := testing.AllocsPerRun(runs, step); allocs != 0 {
		t.Errorf("%.2f allocations per heartbeat and raft fetch, want 0", allocs)
	}
	if fs := set.Findings(detectors.Pass{}); len(fs) != 0 {
		t.Errorf("healthy traffic gave findings:%s", dt.Describe(fs))
	}
}
