package producersequence_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/producersequence"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestIdempotentTrafficDoesNotAllocate: the rule remembers every
// idempotent producer's last batches, but once each partition has its
// history, healthy idempotent traffic (kgo's default) costs it no
// allocation. (detectors/all's allocation test sends no idempotent
// batches.)
func TestIdempotentTrafficDoesNotAllocate(t *testing.T) {
	const parts, warm, runs = 8, 400, 200
	c := flows.MakeConn(netip.MustParseAddrPort("10.2.0.5:40000"), netip.MustParseAddrPort("10.1.0.11:9092"))
	c.ID = 1
	seq := make([]int32, parts)
	var reqs, resps []*flows.Message
	var xs []flows.Exchange
	for i := range warm + runs + 1 {
		p := int32(i % parts)
		at := dt.At(time.Duration(i) * time.Millisecond)
		b := dt.IdempotentBatch(pid, 0, seq[p], ts+int64(i), "value")
		seq[p]++
		q := flowstest.MakeRequest(c, at, int32(i), "orders-producer", dt.ProduceBatches(9, -1, dt.Sent{Topic: "orders", Partition: p, Batch: b}))
		r := flowstest.MakeResponse(q, at.Add(time.Millisecond), dt.ProduceAnswers(9, dt.Answer{Topic: "orders", Partition: p, Offset: int64(i / parts)}))
		reqs, resps = append(reqs, q), append(resps, r)
	}
	for i := range reqs {
		xs = append(xs, flows.Exchange{Conn: c, Req: reqs[i], Resp: resps[i]})
	}
	set, err := detectors.NewSet([]*detectors.Analyzer{producersequence.Analyzer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range warm {
		set.OnRequest(reqs[i])
		set.OnExchange(&xs[i])
	}
	i := warm
	if n := testing.AllocsPerRun(runs, func() {
		set.OnRequest(reqs[i])
		set.OnExchange(&xs[i])
		i++
	}); n != 0 {
		t.Errorf("%.2f allocations per idempotent Produce exchange, want 0", n)
	}
	if fs := set.Findings(detectors.Pass{Nodes: &cluster.Nodes{}}); len(fs) != 0 {
		t.Errorf("healthy idempotent traffic gave findings: %s", fs[0].Summary)
	}
}
