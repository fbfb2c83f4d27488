package pipeline

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/report"
)

// TestFingerprintsDroppedCounted: a producer with more Produce requests
// waiting for their responses than flows keeps record fingerprints for
// (16,384) loses the oldest requests' fingerprints, and the report says
// how many, with one worker and with two, rather than duplicate-batches
// silently comparing fewer records. Under the bound nothing is said.
func TestFingerprintsDroppedCounted(t *testing.T) {
	const bound = 1 << 14
	for _, tc := range []struct {
		requests int
		want     int64
	}{
		{bound - 10, 0},
		{bound + 50, 50},
	} {
		b, err := gen.Script(func(w *gen.Writer) { waitingProducer(w, tc.requests) })
		if err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%d requests, %d workers", tc.requests, workers), func(t *testing.T) {
				r := runBytesWithDetectors(t, "waiting.pcap", b, workers)
				if tot := r.Totals; tot.Requests != int64(tc.requests) || tot.Responses != int64(tc.requests) {
					t.Fatalf("%d requests, %d responses; wrote %d each", tot.Requests, tot.Responses, tc.requests)
				}
				if got := r.Totals.FingerprintsDropped; got != tc.want {
					t.Errorf("record_fingerprints_dropped %d, want %d", got, tc.want)
				}
				var text strings.Builder
				if err := report.WriteText(&text, r); err != nil {
					t.Fatal(err)
				}
				said := strings.Contains(text.String(), fmt.Sprintf("%d Produce requests whose record fingerprints were dropped", tc.want))
				if said != (tc.want > 0) {
					t.Errorf("text says the drop: %v, want %v", said, tc.want > 0)
				}
			})
		}
	}
}

// waitingProducer writes n Produce requests of one record batch each on
// one connection, then their n responses.
func waitingProducer(w *gen.Writer, n int) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := w.Conn(netip.MustParseAddrPort("10.0.0.9:40000"), netip.MustParseAddrPort("10.0.0.1:9092"), t0, gen.ConnOptions{})
	id := kmsg.StringPtr("waiting-producer")
	at := func(i int) time.Time { return t0.Add(time.Millisecond + time.Duration(i)*10*time.Microsecond) }
	for i := range n {
		batch := gen.RecordBatch(0, at(i), []gen.Record{{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d", i)}})
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "orders"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = batch
		tp.Partitions = []kmsg.ProduceRequestTopicPartition{p}
		req.Topics = []kmsg.ProduceRequestTopic{tp}
		c.Request(at(i), int32(i), id, req)
	}
	for i := range n {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		tp := kmsg.NewProduceResponseTopic()
		tp.Topic = "orders"
		p := kmsg.NewProduceResponseTopicPartition()
		p.BaseOffset = int64(i)
		tp.Partitions = []kmsg.ProduceResponseTopicPartition{p}
		resp.Topics = []kmsg.ProduceResponseTopic{tp}
		c.Response(at(n+i), int32(i), resp)
	}
}
