package flows_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestProducedBatches: each produced batch gets the offset the broker gave
// it, counted from its partition's baseOffset in request order; refused
// partitions give -1 and the error, partitions the response leaves out
// nothing; a topic named by id (v13) is found by id.
func TestProducedBatches(t *testing.T) {
	batch := func(n int) []byte {
		recs := make([]gen.Record, n)
		for i := range recs {
			recs[i].Value = []byte(fmt.Sprint(i))
		}
		return gen.RecordBatch(0, t0, recs)
	}
	id := [16]byte{9, 15: 9}
	for _, v := range []int16{9, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = v, -1
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = v
		rt, st := kmsg.NewProduceRequestTopic(), kmsg.NewProduceResponseTopic()
		if v >= 13 {
			rt.TopicID, st.TopicID = id, id
		} else {
			rt.Topic, st.Topic = "orders", "orders"
		}
		for part, p := range []struct {
			batches []int // records per batch
			code    int16
			base    int64
			missing bool
		}{
			{batches: []int{3, 2}, base: 100},
			{batches: []int{4}, code: 6, base: -1},
			{batches: []int{1}, missing: true},
			{batches: []int{2, 2, 1}, base: 7},
		} {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(part)
			for _, n := range p.batches {
				rp.Records = append(rp.Records, batch(n)...)
			}
			rt.Partitions = append(rt.Partitions, rp)
			if !p.missing {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.BaseOffset = int32(part), p.code, p.base
				st.Partitions = append(st.Partitions, sp)
			}
		}
		req.Topics, resp.Topics = append(req.Topics, rt), append(resp.Topics, st)
		c := flows.MakeConn(client, broker)
		q := flowstest.MakeRequest(c, t0, 1, "producer", req)
		r := flowstest.MakeResponse(q, t0, resp)
		var got []string
		flows.ProducedBatches(q, r, func(i int, b *flows.BatchRef, base int64, code int16) {
			got = append(got, fmt.Sprintf("%d:p%d@%d/%d", i, b.Partition, base, code))
		})
		want := []string{"0:p0@100/0", "1:p0@103/0", "2:p1@-1/6", "4:p3@7/0", "5:p3@9/0", "6:p3@11/0"}
		if !slices.Equal(got, want) {
			t.Errorf("v%d: %v, want %v", v, got, want)
		}
		flows.ProducedBatches(q, nil, func(int, *flows.BatchRef, int64, int16) { t.Errorf("v%d: a batch without a response", v) })
	}
}
