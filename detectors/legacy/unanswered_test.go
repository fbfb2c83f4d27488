package legacy_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// opsPinger keeps a connection busy with answered Metadata requests every
// 500 ms from 1 s until end, so the capture lasts that long.
func opsPinger(tl *opsTimeline, end time.Duration) {
	p := tl.dial("10.2.9.9:49999", opsBroker, "pinger")
	for at := time.Second; at <= end; at += 500 * time.Millisecond {
		req, resp := opsMetadata(0)
		p.call(opsAt(at), opsMs(1), req, resp)
	}
}

func opsListOffsets() (*kmsg.ListOffsetsRequest, *kmsg.ListOffsetsResponse) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 7, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = 7
	return req, resp
}

func opsSync() *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.Generation, r.MemberID = 5, "orders-app", 1, "m-1"
	return r
}

func TestUnansweredRequests(t *testing.T) {
	type want struct {
		sev    detectors.Severity
		counts map[string]int64
		fields map[string]any
	}
	for _, tc := range []struct {
		name      string
		overrides map[string]float64
		script    func(tl *opsTimeline)
		want      []want
	}{
		{
			name: "a Produce never answered while the capture goes on for 5 s",
			script: func(tl *opsTimeline) {
				p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
				p.call(opsAt(time.Second), opsMs(2), opsProduce(9), opsProduced(9, 0, 0))
				p.call(opsAt(time.Second+opsMs(500)), 0, opsProduce(9), nil)
				opsPinger(tl, 6*time.Second)
			},
			want: []want{{
				sev:    detectors.Warning,
				counts: map[string]int64{"requests": 1, "expired": 1, "overtaken": 0, "closed": 0, "connections": 1},
				fields: map[string]any{"server": opsBroker, "apis": []string{"Produce"}, "oldest_api": "Produce",
					"client_ids": []string{"producer-1"}, "clients": []string{"10.2.0.5"}},
			}},
		},
		{
			name:      "the same with grace-s 10: in flight, info",
			overrides: map[string]float64{"unanswered-requests.grace-s": 10},
			script: func(tl *opsTimeline) {
				p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
				p.call(opsAt(time.Second+opsMs(500)), 0, opsProduce(9), nil)
				opsPinger(tl, 6*time.Second)
			},
			want: []want{{sev: detectors.Info, counts: map[string]int64{"requests": 1, "in_flight": 1}}},
		},
		{
			name: "overtaken: the next request on the connection is answered",
			script: func(tl *opsTimeline) {
				p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
				p.call(opsAt(time.Second), 0, opsProduce(9), nil)
				p.call(opsAt(time.Second+opsMs(100)), opsMs(2), opsProduce(9), opsProduced(9, 0, 0))
			},
			want: []want{{sev: detectors.Warning, counts: map[string]int64{"requests": 1, "overtaken": 1}}},
		},
		{
			name: "near miss: the consumer's long poll pending at the end is not mentioned",
			script: func(tl *opsTimeline) {
				c := tl.dial("10.2.0.6:40000", opsBroker, "consumer-1")
				for i := range 8 {
					c.call(opsAt(time.Second+time.Duration(i)*500*time.Millisecond), opsMs(500), opsFetch(500), opsFetched(0, 0))
				}
				c.call(opsAt(time.Second+opsMs(4000.5)), 0, opsFetch(500), nil)
				opsPinger(tl, 5*time.Second+opsMs(300))
			},
		},
		{
			name: "near miss: a Fetch with MaxWaitMillis 5000 pending for 4 s",
			script: func(tl *opsTimeline) {
				c := tl.dial("10.2.0.6:40000", opsBroker, "consumer-1")
				c.call(opsAt(time.Second), 0, opsFetch(5000), nil)
				opsPinger(tl, 5*time.Second)
			},
		},
		{
			name: "a Fetch with MaxWaitMillis 500 pending for 3 s",
			script: func(tl *opsTimeline) {
				c := tl.dial("10.2.0.6:40000", opsBroker, "consumer-1")
				c.call(opsAt(time.Second), 0, opsFetch(500), nil)
				opsPinger(tl, 4*time.Second)
			},
			want: []want{{sev: detectors.Warning, counts: map[string]int64{"requests": 1, "expired": 1},
				fields: map[string]any{"apis": []string{"Fetch"}}}},
		},
		{
			name: "near miss: a ListOffsets 140 ms before the end of the capture is in flight (info)",
			script: func(tl *opsTimeline) {
				opsPinger(tl, 3*time.Second)
				c := tl.dial("10.2.0.6:40000", opsBroker, "consumer-1")
				req, _ := opsListOffsets()
				c.call(opsAt(3*time.Second-opsMs(140)), 0, req, nil)
			},
			want: []want{{sev: detectors.Info, counts: map[string]int64{"requests": 1, "in_flight": 1},
				fields: map[string]any{"apis": []string{"ListOffsets"}}}},
		},
		{
			name: "near miss: JoinGroup and SyncGroup held within the 60 s rebalance timeout",
			script: func(tl *opsTimeline) {
				g := tl.dial("10.2.0.7:40000", opsBroker, "consumer-1")
				g.call(opsAt(time.Second), opsMs(1), opsJoin("", 60000), opsJoined(79, "m-1"))
				g.call(opsAt(2*time.Second), 0, opsJoin("m-1", 60000), nil)
				h := tl.dial("10.2.0.8:40000", opsBroker, "consumer-2")
				h.call(opsAt(time.Second), opsMs(1), opsJoin("m-2", 60000), opsJoined(0, "m-2"))
				h.call(opsAt(2*time.Second), 0, opsSync(), nil)
				opsPinger(tl, 30*time.Second)
			},
		},
		{
			name: "a JoinGroup held past its 10 s rebalance timeout",
			script: func(tl *opsTimeline) {
				g := tl.dial("10.2.0.7:40000", opsBroker, "consumer-1")
				g.call(opsAt(time.Second), 0, opsJoin("m-1", 10000), nil)
				opsPinger(tl, 15*time.Second)
			},
			want: []want{{sev: detectors.Warning, counts: map[string]int64{"requests": 1, "expired": 1},
				fields: map[string]any{"apis": []string{"JoinGroup"}}}},
		},
		{
			name: "the client gives up after request.timeout.ms and closes the connection",
			script: func(tl *opsTimeline) {
				p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
				req, _ := opsMetadata(0)
				p.call(opsAt(time.Second), 0, req, nil)
				p.close(opsAt(31 * time.Second))
				opsPinger(tl, 32*time.Second)
			},
			want: []want{{sev: detectors.Warning, counts: map[string]int64{"requests": 1, "closed": 1},
				fields: map[string]any{"apis": []string{"Metadata"}}}},
		},
		{
			name: "near miss: the connection closes 100 ms after a Produce (in flight, info)",
			script: func(tl *opsTimeline) {
				p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
				p.call(opsAt(time.Second), 0, opsProduce(9), nil)
				p.close(opsAt(time.Second + opsMs(100)))
				opsPinger(tl, 20*time.Second)
			},
			want: []want{{sev: detectors.Info, counts: map[string]int64{"requests": 1, "in_flight": 1}}},
		},
		{
			name: "several connections and APIs to one broker, one finding; another broker, another",
			script: func(tl *opsTimeline) {
				p := tl.dial("10.2.0.5:40000", opsBroker, "producer-1")
				p.call(opsAt(time.Second), 0, opsProduce(9), nil)
				p.call(opsAt(time.Second+opsMs(10)), 0, opsProduce(9), nil)
				q := tl.dial("10.2.0.6:40000", opsBroker, "producer-2")
				req, _ := opsMetadata(0)
				q.call(opsAt(2*time.Second), 0, req, nil)
				r := tl.dial("10.2.0.6:40001", opsBroker2, "producer-2")
				r.call(opsAt(3*time.Second), 0, opsProduce(9), nil)
				opsPinger(tl, 10*time.Second)
			},
			want: []want{
				{sev: detectors.Warning, counts: map[string]int64{"requests": 3, "expired": 3, "connections": 2},
					fields: map[string]any{"server": opsBroker, "apis": []string{"Metadata", "Produce"},
						"by_api": map[string]int64{"Metadata": 1, "Produce": 2}, "oldest_api": "Produce",
						"client_ids": []string{"producer-1", "producer-2"}}},
				{sev: detectors.Warning, counts: map[string]int64{"requests": 1},
					fields: map[string]any{"server": opsBroker2}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := opsOf(opsAnalyse(t, tc.overrides, opsCapture(t, tc.script)), "unanswered-requests")
			if len(got) != len(tc.want) {
				t.Fatalf("%d unanswered-requests findings, want %d:%s", len(got), len(tc.want), opsDescribe(got))
			}
			for i, w := range tc.want {
				opsCheck(t, got[i], w.sev, w.counts, w.fields)
			}
		})
	}
}

// TestUnansweredRequestsCaptureLoss: a response lost in the capture (the
// client ACKs bytes the capture does not have) makes its request look
// overtaken; with the gap on record it is info, not a broker failure.
func TestUnansweredRequestsCaptureLoss(t *testing.T) {
	pcap := opsCapture(t, func(tl *opsTimeline) {
		// Segments in send order: 0 request 1, 1 response 1 (lost),
		// 2 request 2, 3 response 2.
		c := tl.w.Conn(netip.MustParseAddrPort("10.2.0.5:40000"), netip.MustParseAddrPort(opsBroker), opsStart,
			gen.ConnOptions{Loss: []int{1}})
		p := &opsPeer{tl: tl, c: c, id: "producer-1", corr: 1}
		p.call(opsAt(time.Second), opsMs(2), opsProduce(9), opsProduced(9, 0, 0))
		p.call(opsAt(time.Second+opsMs(100)), opsMs(2), opsProduce(9), opsProduced(9, 0, 0))
		opsPinger(tl, 5*time.Second)
	})
	got := opsOf(opsAnalyse(t, nil, pcap), "unanswered-requests")
	if len(got) != 1 {
		t.Fatalf("unanswered-requests findings:%s", opsDescribe(got))
	}
	opsCheck(t, got[0], detectors.Info, map[string]int64{"requests": 1, "capture_gaps": 1}, nil)
}
