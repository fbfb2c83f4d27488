package flows_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

// TestNoAllocationsPerPacket pins the steady-state path from packet to
// framing: data segments of an established connection that do not
// complete a frame, and pure ACKs, must not allocate.
func TestNoAllocationsPerPacket(t *testing.T) {
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := w.Conn(client, broker, t0, gen.ConnOptions{MSS: 1000})
	c.Request(t0.Add(time.Millisecond), 1, kmsg.StringPtr("id"), apiVersions(3))
	c.Response(t0.Add(2*time.Millisecond), 1, apiVersionsResp(3))
	// A ~2 MB Produce: about 2000 segments, none completing a frame
	// until the last.
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = 9, -1, 1000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = gen.RecordBatch(0, t0, []gen.Record{{Value: bytes.Repeat([]byte{'x'}, 2<<20)}})
	tp.Partitions = append(tp.Partitions, pp)
	p.Topics = append(p.Topics, tp)
	c.Request(t0.Add(3*time.Millisecond), 2, kmsg.StringPtr("id"), p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("t", 0, &buf)
	if err != nil {
		t.Fatal(err)
	}
	// Read every packet up front (copies), so that reading is not measured.
	var pkts []capture.Packet
	var pk capture.Packet
	for f.Next(&pk) == nil {
		q := pk
		q.Data = append([]byte(nil), pk.Data...)
		pkts = append(pkts, q)
	}
	if len(pkts) < 1000 {
		t.Fatalf("only %d packets", len(pkts))
	}
	a := flows.New(flows.DefaultConfig())
	// Warm up: handshake, the ApiVersions exchange and the first part of
	// the Produce (buffers reach their size).
	warm := len(pkts) / 2
	for i := 0; i < warm; i++ {
		a.Packet(&pkts[i])
	}
	i := warm
	allocs := testing.AllocsPerRun(len(pkts)/4, func() {
		a.Packet(&pkts[i])
		i++
	})
	if allocs != 0 {
		t.Errorf("%.2f allocations per packet on the steady-state path, want 0", allocs)
	}
}
