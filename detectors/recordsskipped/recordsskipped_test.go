package recordsskipped_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/recordsskipped"
)

const (
	broker = "10.1.0.10:9092"
	client = "10.2.0.5:40000"
)

// committed answers an OffsetFetch of group for orders-0 with off.
func committed(h *dt.Harness, at time.Duration, group string, off int64) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 5, group
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = 5
	t := kmsg.NewOffsetFetchResponseTopic()
	t.Topic = "orders"
	p := kmsg.NewOffsetFetchResponseTopicPartition()
	p.Partition, p.Offset = 0, off
	t.Partitions = append(t.Partitions, p)
	resp.Topics = append(resp.Topics, t)
	h.Call(h.Conn("10.2.0.5:40001", broker), dt.At(at), time.Millisecond, "audit", req, resp)
}

// listed answers a ListOffsets for orders-0 at ts (-2 earliest, -1
// latest) with off.
func listed(h *dt.Harness, at time.Duration, ts, off int64) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = 4
	t := kmsg.NewListOffsetsResponseTopic()
	t.Topic = "orders"
	p := kmsg.NewListOffsetsResponseTopicPartition()
	p.Partition, p.Offset, p.Timestamp = 0, off, -1
	t.Partitions = append(t.Partitions, p)
	resp.Topics = append(resp.Topics, t)
	h.Call(h.Conn(client, broker), dt.At(at), time.Millisecond, "audit", req, resp)
}

// fetch fetches orders-0 from off, answered with code and the log start.
func fetch(h *dt.Harness, at time.Duration, off int64, code int16, logStart int64) {
	resp := dt.ConsumerFetched("orders", 0, code, 100, 100, -1, -1, nil)
	resp.Topics[0].Partitions[0].LogStartOffset = logStart
	h.Call(h.Conn(client, broker), dt.At(at), 5*time.Millisecond, "audit", dt.ConsumerFetch("orders", 0, off, 0), resp)
}

func TestRecordsSkipped(t *testing.T) {
	dt.Run(t, recordsskipped.Analyzer, []dt.Case{
		{
			Name: "committed below the log start, out of range, reset to earliest: the deleted records",
			Traffic: func(h *dt.Harness) {
				committed(h, time.Second, "audit-group", 20)
				fetch(h, 2*time.Second, 20, 1, 60)
				listed(h, 2100*time.Millisecond, -2, 60)
				fetch(h, 2200*time.Millisecond, 60, 0, 60)
				fetch(h, 2700*time.Millisecond, 100, 0, 60)
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &recordsskipped.Finding{
					OffsetsSkipped: 40, OffsetsDeleted: 40, PartitionCount: 1, ClientID: "audit",
					Host: "10.2.0.5", Groups: []string{"audit-group"}, OutOfRange: int64(1),
				},
				Summary: []string{`consumer "audit" on 10.2.0.5 (group audit-group) skipped 40 offsets it will never read: orders-0 20->60`,
					"40 of them deleted from the log"},
			}},
			Explanation: []string{"a Fetch at offset 20 was answered OFFSET_OUT_OF_RANGE; the log started at 60"},
			Next:        []string{"--group audit-group"},
		},
		{
			Name: "no error at all: committed 20, the log starts at 60, reset to latest (100)",
			Traffic: func(h *dt.Harness) {
				committed(h, time.Second, "audit-group", 20)
				listed(h, 1100*time.Millisecond, -1, 100)
				listed(h, 1200*time.Millisecond, -2, 60)
				fetch(h, 2*time.Second, 100, 0, 60)
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &recordsskipped.Finding{
					OffsetsSkipped: 80, OffsetsDeleted: 40, OutOfRange: int64(0),
				}, Exact: []string{"OutOfRange"},
			}},
			Explanation: []string{"OffsetFetch answered the committed offset 20, with no error; the log started at 60",
				"40 of the 80 offsets were still in the log"},
		},
		{
			Name: "near miss: fetched from the committed offset: nothing",
			Traffic: func(h *dt.Harness) {
				committed(h, time.Second, "audit-group", 20)
				listed(h, 1100*time.Millisecond, -2, 0)
				fetch(h, 2*time.Second, 20, 0, 0)
				fetch(h, 3*time.Second, 100, 0, 0)
			},
		},
		{
			Name: "near miss: fetched past the commit with nothing to explain it (its own position): nothing",
			Traffic: func(h *dt.Harness) {
				committed(h, time.Second, "audit-group", 20)
				fetch(h, 2*time.Second, 35, 0, 0)
			},
		},
		{
			Name: "near miss: out of range, reset lower (the log was truncated): read twice, not lost",
			Traffic: func(h *dt.Harness) {
				fetch(h, time.Second, 120, 1, 0)
				listed(h, 1100*time.Millisecond, -1, 100)
				fetch(h, 1200*time.Millisecond, 100, 0, 0)
			},
		},
		{
			Name: "out of range without a committed offset: a jump of the fetch position",
			Traffic: func(h *dt.Harness) {
				fetch(h, time.Second, 500, 0, 0)
				fetch(h, 2*time.Second, 510, 1, 700)
				fetch(h, 2100*time.Millisecond, 700, 0, 700)
			},
			Want: []dt.Want{{Severity: detectors.Warning, Detail: &recordsskipped.Finding{
				OffsetsSkipped: 190, OffsetsDeleted: 190, Groups: []string(nil),
			}, Exact: []string{"Groups"}}},
		},
		{
			Name:     "fewer offsets than min-skipped: nothing",
			Settings: map[string]string{"min-skipped": "50"},
			Traffic: func(h *dt.Harness) {
				committed(h, time.Second, "audit-group", 20)
				fetch(h, 2*time.Second, 20, 1, 60)
				fetch(h, 2200*time.Millisecond, 60, 0, 60)
			},
		},
	}, nil)
}
