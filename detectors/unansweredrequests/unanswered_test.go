package unansweredrequests_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/unansweredrequests"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

const broker, broker2 = "10.1.0.10:9092", "10.1.0.11:9092"

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// dial opens a connection whose handshake, and so a packet from the
// server, the capture holds.
func dial(h *dt.Harness, client, server string) *flows.Conn {
	c := h.Conn(client, server)
	c.Handshake, c.Packets = true, [2]int64{1, 1}
	return c
}

// pending sends a request from c at at that is still unanswered when the
// capture ends (or overtaken, if a later one on c is answered).
func pending(h *dt.Harness, c *flows.Conn, at time.Duration, clientID string, req kmsg.Request) *flows.Message {
	q, _ := h.Call(c, dt.At(at), 0, clientID, req, nil)
	h.Unanswered(c, q)
	return q
}

// closeAt ends c with a FIN both ways at at.
func closeAt(c *flows.Conn, at time.Duration) { c.Closed, c.LastSeen = true, dt.At(at) }

// pinger keeps a connection busy with answered Metadata requests every
// 500 ms from 1 s, the last answered at end, so the capture ends then.
func pinger(h *dt.Harness, end time.Duration) {
	c := dial(h, "10.2.9.9:49999", broker)
	for at := time.Second; at < end-ms(1); at += 500 * time.Millisecond {
		req, resp := dt.MetadataErrors(0)
		h.Call(c, dt.At(at), ms(1), "pinger", req, resp)
	}
	req, resp := dt.MetadataErrors(0)
	h.Call(c, dt.At(end-ms(1)), ms(1), "pinger", req, resp)
}

func metadata() kmsg.Request { req, _ := dt.MetadataErrors(0); return req }

// waiting is a Produce from producer-1 still pending when a capture of
// end ends (or, with closeAfter, when its connection closes that long
// after it was sent).
func waiting(end, closeAfter time.Duration) func(h *dt.Harness) {
	return func(h *dt.Harness) {
		p := dial(h, "10.2.0.5:40000", broker)
		pending(h, p, time.Second, "producer-1", dt.Produce(9))
		if closeAfter > 0 {
			closeAt(p, time.Second+closeAfter)
		}
		pinger(h, end)
	}
}

// tcase is one case of TestUnansweredRequests.
type tcase struct {
	name        string
	settings    map[string]string
	traffic     func(h *dt.Harness)
	want        []dt.Want
	explanation []string
}

// atEnd is a Produce still waiting, unanswered, waitMs when the capture
// ends: graded want.
func atEnd(name string, waitMs float64, want detectors.Severity) tcase {
	return tcase{name: name, traffic: waiting(time.Second+ms(waitMs), 0),
		want: []dt.Want{{Severity: want, Detail: &unansweredrequests.Finding{
			WaitedS: waitMs / 1000, Ongoing: true,
			Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
		}, Exact: []string{"WaitedS"}}}}
}

func TestUnansweredRequests(t *testing.T) {
	for _, tc := range []tcase{
		{
			name: "a Produce never answered while the capture goes on for 5 s",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				h.Call(p, dt.At(time.Second), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
				pending(h, p, time.Second+ms(500), "producer-1", dt.Produce(9))
				pinger(h, 6*time.Second)
			},
			want: []dt.Want{{
				Severity: detectors.Warning,
				Detail: &unansweredrequests.Finding{
					Server: broker, APIs: []string{"Produce"}, ByAPI: map[string]int64{"Produce": 1},
					OldestAPI: "Produce", OldestPacket: uint64(3), ClientIDs: []string{"producer-1"},
					Clients: []string{"10.2.0.5"}, WaitedS: 4.5, Ongoing: true,
					Counted: unansweredrequests.Counted{Requests: 1, Connections: 1, ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
				}, Exact: []string{"Server"},
				Summary: []string{"1 request(s) to node 1 (" + broker + ") never answered (Produce 1) on 1 connection(s); oldest Produce at 00:00:01.500",
					"clients waited up to 4.5 s, some still waiting at the end"},
				Evidence: []uint64{3},
			}},
		},
		{
			name:     "the same with grace 10 s: in flight, info",
			settings: map[string]string{"grace": "10s"},
			traffic:  waiting(6*time.Second, 0),
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{
				Servers: []string{broker}, APIs: []string{"Produce"},
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 1, "one_sided": 0, "capture_gaps": 0, "long_poll": 0}},
			},
				Summary: []string{"1 request(s) without a response that may yet have been answered (Produce 1)"}}},
		},
		{
			name:     "the old name grace-s, in seconds, still works",
			settings: map[string]string{"grace-s": "10"},
			traffic:  waiting(6*time.Second, 0),
			want:     []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 1, "one_sided": 0, "capture_gaps": 0, "long_poll": 0}}}}},
		},
		{
			name:    "near miss: the capture ends 0.9 s after a Produce: in flight",
			traffic: waiting(time.Second+ms(900), 0),
			want:    []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 1, "one_sided": 0, "capture_gaps": 0, "long_poll": 0}}}}},
		},
		{
			name:    "near miss the other way: it ends a whole grace (1 s) after: expired, but waited only 1 s (info)",
			traffic: waiting(2*time.Second, 0),
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				WaitedS: 1.0,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
			}}},
		},
		atEnd("near miss: a Produce still waiting 2.9 s at the end: info", 2900, detectors.Info),
		atEnd("near miss the other way: still waiting 3 s at the end: clients felt it, a warning", 3000, detectors.Warning),
		atEnd("near miss: still waiting 9.9 s at the end: a warning", 9900, detectors.Warning),
		atEnd("near miss the other way: still waiting 10 s at the end: not healed, an error", 10000, detectors.Error),
		{
			name: "overtaken: the next request on the connection is answered 102 ms on: info",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				h.Call(p, dt.At(time.Second+ms(100)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				WaitedS: 0.102, Ongoing: false,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 0, "overtaken": 1, "closed": 0}},
			}, Exact: []string{"Ongoing"}}},
		},
		{
			// An answer is checked for a tail to settle only on a
			// connection that has had one (rule.waited).
			name: "overtaken with another connection answered in between: an answer settles its own connection's waiting request only",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				o := dial(h, "10.2.0.6:40000", broker)
				h.Call(p, dt.At(ms(900)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				h.Call(o, dt.At(time.Second+ms(50)), ms(2), "producer-2", dt.Produce(9), dt.Produced(9, 0, 0))
				h.Call(p, dt.At(time.Second+ms(100)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				WaitedS: 0.102, Ongoing: false,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 0, "overtaken": 1, "closed": 0}},
			}, Exact: []string{"Ongoing"}}},
		},
		{
			name: "near miss: overtaken by an answer 2.9 s on: info",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				h.Call(p, dt.At(time.Second+ms(2898)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				WaitedS: 2.9,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 0, "overtaken": 1, "closed": 0}},
			}}},
		},
		{
			name: "near miss the other way: overtaken by an answer 3 s on: a warning",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				h.Call(p, dt.At(time.Second+ms(2998)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				WaitedS: 3.0, Ongoing: false,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 0, "overtaken": 1, "closed": 0}},
			}, Exact: []string{"Ongoing"}}},
		},
		{
			name: "near miss: overtaken on a connection that lost segments: the response may be in them",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				q := flowstest.MakeRequest(p, dt.At(time.Second+ms(100)), 2, "producer-1", dt.Produce(9))
				h.Request(q)
				h.Exchange(&flows.Exchange{Conn: p, Req: q, Resp: flowstest.MakeResponse(q, dt.At(time.Second+ms(102)), dt.Produced(9, 0, 0)), ConnGaps: 1})
				pinger(h, 5*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 0, "one_sided": 0, "capture_gaps": 1, "long_poll": 0}}}}},
		},
		{
			name: "near miss: still waiting at the end on a connection that lost segments",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				p.Gaps = 1
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				pinger(h, 5*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 0, "one_sided": 0, "capture_gaps": 1, "long_poll": 0}}}}},
		},
		{
			name: "near miss: one-sided, the capture holds no packet from the server",
			traffic: func(h *dt.Harness) {
				p := h.Conn("10.2.0.5:40000", broker)
				p.Packets = [2]int64{3, 0}
				q, _ := h.Call(p, dt.At(time.Second), 0, "producer-1", dt.Produce(9), nil)
				h.Exchange(&flows.Exchange{Conn: p, Req: q, OneSided: true})
				pending(h, p, 2*time.Second, "producer-1", dt.Produce(9))
				pinger(h, 6*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 2, ByReason: map[string]int64{"in_flight": 0, "one_sided": 2, "capture_gaps": 0, "long_poll": 0}}}}},
		},
		{
			name: "near miss: the consumer's long poll pending at the end is not mentioned",
			traffic: func(h *dt.Harness) {
				c := dial(h, "10.2.0.6:40000", broker)
				for i := range 8 {
					h.Call(c, dt.At(time.Second+time.Duration(i)*500*time.Millisecond), ms(500), "consumer-1", dt.Fetch(500), dt.Fetched(0, 0))
				}
				pending(h, c, time.Second+ms(4000.5), "consumer-1", dt.Fetch(500))
				pinger(h, 5*time.Second+ms(300))
			},
		},
		{
			name: "near miss: a Fetch with MaxWaitMillis 5000 pending for 4 s",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.6:40000", broker), time.Second, "consumer-1", dt.Fetch(5000))
				pinger(h, 5*time.Second)
			},
		},
		{
			name: "near miss: a Fetch with MaxWaitMillis 500 pending for 1.4 s",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.6:40000", broker), time.Second, "consumer-1", dt.Fetch(500))
				pinger(h, 2*time.Second+ms(400))
			},
		},
		{
			name: "near miss the other way: a Fetch with MaxWaitMillis 500 pending for 1.6 s: expired, 1.1 s beyond its wait (info)",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.6:40000", broker), time.Second, "consumer-1", dt.Fetch(500))
				pinger(h, 2*time.Second+ms(600))
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				APIs: []string{"Fetch"}, WaitedS: 1.1,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
			}}},
		},
		{
			name: "near miss: a Fetch with MaxWaitMillis 500 pending for 3.4 s: 2.9 s beyond its wait, info",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.6:40000", broker), time.Second, "consumer-1", dt.Fetch(500))
				pinger(h, 4*time.Second+ms(400))
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				WaitedS: 2.9,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
			}}},
		},
		{
			name: "near miss the other way: a Fetch with MaxWaitMillis 500 pending for 3.5 s: 3 s beyond its wait, a warning",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.6:40000", broker), time.Second, "consumer-1", dt.Fetch(500))
				pinger(h, 4*time.Second+ms(500))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				APIs: []string{"Fetch"}, WaitedS: 3.0,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
			}}},
		},
		{
			name: "a Fetch whose body was lost waits the 500 ms a consumer's does",
			traffic: func(h *dt.Harness) {
				c := dial(h, "10.2.0.6:40000", broker)
				q := flowstest.MakeRequest(c, dt.At(time.Second), 1, "consumer-1", dt.Fetch(5000))
				q.Req = nil
				h.Request(q)
				h.Unanswered(c, q)
				pinger(h, 4*time.Second+ms(500))
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				WaitedS: 3.0,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
			}}},
		},
		{
			name: "near miss: a Fetch with MaxWaitMillis 5000 whose connection closes 7.9 s on: 2.9 s beyond its wait, info",
			traffic: func(h *dt.Harness) {
				c := dial(h, "10.2.0.6:40000", broker)
				pending(h, c, time.Second, "consumer-1", dt.Fetch(5000))
				closeAt(c, 8*time.Second+ms(900))
				pinger(h, 10*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{
				WaitedS: 2.9, Ongoing: false,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 0, "overtaken": 0, "closed": 1}},
			}, Exact: []string{"Ongoing"}}},
		},
		{
			name: "near miss the other way: the same connection closes 8 s on: 3 s beyond its wait, a warning",
			traffic: func(h *dt.Harness) {
				c := dial(h, "10.2.0.6:40000", broker)
				pending(h, c, time.Second, "consumer-1", dt.Fetch(5000))
				closeAt(c, 9*time.Second)
				pinger(h, 10*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				WaitedS: 3.0,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 0, "overtaken": 0, "closed": 1}},
			}}},
			explanation: []string{"5.0 s of it is what the broker may hold it (MaxWaitMillis, or the rebalance timeout). Clients waited up to 3.0 s beyond that."},
		},
		{
			name: "near miss: a Fetch whose body was lost waits as long as the connection's last Fetch",
			traffic: func(h *dt.Harness) {
				c := dial(h, "10.2.0.6:40000", broker)
				h.Call(c, dt.At(ms(100)), 5*time.Second, "consumer-1", dt.Fetch(5000), dt.Fetched(0, 0))
				q := flowstest.MakeRequest(c, dt.At(6*time.Second), 2, "consumer-1", dt.Fetch(5000))
				q.Req = nil
				h.Request(q)
				h.Unanswered(c, q)
				pinger(h, 9*time.Second)
			},
		},
		{
			name: "near miss: a ListOffsets 140 ms before the end of the capture is in flight (info)",
			traffic: func(h *dt.Harness) {
				pinger(h, 3*time.Second)
				pending(h, dial(h, "10.2.0.6:40000", broker), 3*time.Second-ms(140), "consumer-1", dt.ListOffsets())
			},
			want: []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{
				APIs:    []string{"ListOffsets"},
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 1, "one_sided": 0, "capture_gaps": 0, "long_poll": 0}},
			}}},
		},
		{
			name: "near miss: JoinGroup and SyncGroup held within the 60 s rebalance timeout",
			traffic: func(h *dt.Harness) {
				g := dial(h, "10.2.0.7:40000", broker)
				h.Call(g, dt.At(time.Second), ms(1), "consumer-1", dt.Join("", 60000), dt.Joined(79, "m-1"))
				pending(h, g, 2*time.Second, "consumer-1", dt.Join("m-1", 60000))
				s := dial(h, "10.2.0.8:40000", broker)
				h.Call(s, dt.At(time.Second), ms(1), "consumer-2", dt.Join("m-2", 60000), dt.Joined(0, "m-2"))
				pending(h, s, 2*time.Second, "consumer-2", dt.Sync())
				pinger(h, 30*time.Second)
			},
		},
		{
			name: "near miss: a JoinGroup held 10.5 s, within its 10 s rebalance timeout and the grace",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.7:40000", broker), time.Second, "consumer-1", dt.Join("m-1", 10000))
				pinger(h, 11*time.Second+ms(500))
			},
		},
		{
			name: "a JoinGroup held past its 10 s rebalance timeout",
			traffic: func(h *dt.Harness) {
				pending(h, dial(h, "10.2.0.7:40000", broker), time.Second, "consumer-1", dt.Join("m-1", 10000))
				pinger(h, 15*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				APIs:    []string{"JoinGroup"},
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 1, "overtaken": 0, "closed": 0}},
			}}},
		},
		{
			name: "the client gives up after request.timeout.ms (30 s) and closes the connection: an error",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				pending(h, p, time.Second, "producer-1", metadata())
				closeAt(p, 31*time.Second)
				pinger(h, 32*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Error, Detail: &unansweredrequests.Finding{
				APIs: []string{"Metadata"}, WaitedS: 30.0, Ongoing: false,
				Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 0, "overtaken": 0, "closed": 1}},
			}, Exact: []string{"Ongoing"}}},
		},
		{
			name:    "near miss: the connection closes 29.9 s after a Produce: a warning",
			traffic: waiting(32*time.Second, 29*time.Second+ms(900)),
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				WaitedS: 29.9,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 0, "overtaken": 0, "closed": 1}},
			}}},
		},
		{
			name:    "near miss: the connection closes 12 s after a Produce: healed by the close, a warning",
			traffic: waiting(20*time.Second, 12*time.Second),
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
				WaitedS: 12.0, Ongoing: false,
				Counted: unansweredrequests.Counted{ByReason: map[string]int64{"expired": 0, "overtaken": 0, "closed": 1}},
			}, Exact: []string{"Ongoing"}}},
		},
		{
			name:    "near miss: the connection closes 100 ms after a Produce (in flight, info)",
			traffic: waiting(20*time.Second, ms(100)),
			want:    []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 1, "one_sided": 0, "capture_gaps": 0, "long_poll": 0}}}}},
		},
		{
			name:    "near miss the other way: the connection closes 1.1 s after a Produce: closed unanswered, info",
			traffic: waiting(20*time.Second, ms(1100)),
			want:    []dt.Want{{Severity: detectors.Info, Detail: &unansweredrequests.Finding{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 0, "overtaken": 0, "closed": 1}}}}},
		},
		{
			name: "several connections and APIs to one broker, one finding; another broker, another",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				pending(h, p, time.Second, "producer-1", dt.Produce(9))
				pending(h, p, time.Second+ms(10), "producer-1", dt.Produce(9))
				q := dial(h, "10.2.0.6:40000", broker)
				pending(h, q, 2*time.Second, "producer-2", metadata())
				r := dial(h, "10.2.0.6:40001", broker2)
				pending(h, r, 3*time.Second, "producer-2", dt.Produce(9))
				pinger(h, 10*time.Second)
			},
			want: []dt.Want{
				{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
					Server: broker, APIs: []string{"Metadata", "Produce"},
					ByAPI: map[string]int64{"Metadata": 1, "Produce": 2}, OldestAPI: "Produce",
					ClientIDs: []string{"producer-1", "producer-2"},
					Counted:   unansweredrequests.Counted{Requests: 3, Connections: 2, ByReason: map[string]int64{"expired": 3, "overtaken": 0, "closed": 0}},
				}, Exact: []string{"Server"},
					Summary: []string{"3 request(s) to node 1 (" + broker + ") never answered (Produce 2, Metadata 1) on 2 connection(s)"}},
				{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{
					Server: broker2, Counted: unansweredrequests.Counted{Requests: 1},
				}, Exact: []string{"Server"}},
			},
		},
		{
			name: "a connection with more than 1024 requests waiting: the oldest count at once",
			traffic: func(h *dt.Harness) {
				p := dial(h, "10.2.0.5:40000", broker)
				for i := range 1030 {
					pending(h, p, time.Second+time.Duration(i)*time.Millisecond, "producer-1", dt.Produce(9))
				}
				pinger(h, 10*time.Second)
			},
			want: []dt.Want{{Severity: detectors.Warning, Detail: &unansweredrequests.Finding{Counted: unansweredrequests.Counted{Requests: 1030, ByReason: map[string]int64{"expired": 1024, "overtaken": 6, "closed": 0}}}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dt.New(t, map[string]map[string]string{"unanswered-requests": tc.settings}, unansweredrequests.Analyzer)
			tc.traffic(h)
			fs := h.Findings()
			dt.Check(t, fs, "unanswered-requests", tc.want...)
			for _, s := range tc.explanation {
				if len(fs) == 0 || !strings.Contains(fs[0].Explanation, s) {
					t.Errorf("explanation lacks %q:%s", s, dt.Describe(fs))
				}
			}
		})
	}
}

// TestUnansweredSnapshot: Findings settles the requests still open into
// the groups; Snapshot must not, or the final findings would count them
// differently. A request is reported unanswered when the response to the
// next one arrives: a snapshot between the two sees it in flight, the
// final findings overtaken.
func TestUnansweredSnapshot(t *testing.T) {
	run := func(snap bool) ([]detectors.Finding, []detectors.Finding) {
		h := dt.New(t, nil, unansweredrequests.Analyzer)
		p := dial(h, "10.2.0.5:40000", broker)
		pending(h, p, time.Second, "producer-1", dt.Produce(9))
		var mid []detectors.Finding
		if snap {
			mid = h.Snapshot()
			h.Snapshot()
		}
		h.Call(p, dt.At(time.Second+ms(500)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
		pinger(h, 6*time.Second)
		if snap {
			h.Snapshot()
		}
		return h.Findings(), mid
	}
	want, _ := run(false)
	dt.Check(t, want, "unanswered-requests", dt.Want{Severity: detectors.Info, Detail: &unansweredrequests.Finding{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"expired": 0, "overtaken": 1, "closed": 0}}}})
	got, mid := run(true)
	dt.Check(t, mid, "unanswered-requests", dt.Want{Severity: detectors.Info, Detail: &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 1, ByReason: map[string]int64{"in_flight": 1, "one_sided": 0, "capture_gaps": 0, "long_poll": 0}}}})
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) != string(g) {
		t.Errorf("with snapshots:%s\nwithout:%s", dt.Describe(got), dt.Describe(want))
	}
}

// TestUnansweredProse: what the warning says of the oldest request and
// of why the requests count.
func TestUnansweredProse(t *testing.T) {
	h := dt.New(t, nil, unansweredrequests.Analyzer)
	p := dial(h, "10.2.0.5:40000", broker)
	pending(h, p, time.Second, "producer-1", dt.Produce(9))
	h.Call(p, dt.At(time.Second+ms(100)), ms(2), "producer-1", dt.Produce(9), dt.Produced(9, 0, 0))
	q := dial(h, "10.2.0.6:40000", broker)
	pending(h, q, 2*time.Second, "producer-2", metadata())
	closeAt(q, 20*time.Second)
	pinger(h, 30*time.Second)
	fs := h.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	// The pinger's Metadata names the broker node 1.
	want := "node 1 (" + broker + `) got 2 request(s) it did not answer, from client id(s) "producer-1", "producer-2": 1 overtaken: ` +
		`a later request on the same connection was answered, and Kafka answers a connection's requests in order, so ` +
		`they never will be (the broker dropped them, or the capture missed their responses); 1 still unanswered, past ` +
		`that allowance, when their connection closed (what a client does when its request.timeout.ms expires). The ` +
		`oldest, Produce v9 corr 1 (packet 1), was sent at 00:00:01.000 and waited 102 ms until a later one was answered. ` +
		`The longest wait: Metadata v12 corr 1 (packet 4), 18.0 s. Clients waited up to 18.0 s.`
	if fs[0].Explanation != want {
		t.Errorf("explanation\n%s\nwant\n%s", fs[0].Explanation, want)
	}
	if want := "kfsniff -r <capture> --frames --conn 1 shows the oldest request"; len(fs[0].Next) < len(want) || fs[0].Next[:len(want)] != want {
		t.Errorf("next %q", fs[0].Next)
	}
}

// TestPendingProse: the info finding says, reason by reason, why each
// request may yet have been answered.
func TestPendingProse(t *testing.T) {
	h := dt.New(t, nil, unansweredrequests.Analyzer)
	pending(h, dial(h, "10.2.0.6:40000", broker), 2*time.Second, "consumer-1", dt.ListOffsets())
	g := dial(h, "10.2.0.5:40000", broker)
	g.Gaps = 2
	pending(h, g, time.Second, "producer-1", dt.Produce(9))
	o := h.Conn("10.2.0.7:40000", broker)
	o.Packets = [2]int64{2, 0}
	pending(h, o, 2*time.Second, "producer-2", dt.Produce(9))
	pinger(h, 2*time.Second+ms(500))
	fs := h.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings:%s", dt.Describe(fs))
	}
	want := "3 request(s) have no response in the capture, but that does not show that the broker failed to answer. " +
		"In flight: 1 sent less than 1.0 s (or a Fetch's MaxWaitMillis, a group's rebalance timeout, more) before the " +
		"capture ended or their connection closed, too soon to call them unanswered. One-sided: 1 on connections of " +
		"which the capture holds not one packet from the server (a one-sided, filtered or sampled capture), so whether " +
		"they were answered cannot be told. Capture gaps: 1 on connections that lost segments in the capture, where " +
		"their responses may have been lost. The oldest, Produce v9 corr 1 (packet 2), was sent at 00:00:01.000, 1.5 s " +
		"before the capture ended or its connection closed."
	if fs[0].Explanation != want {
		t.Errorf("explanation\n%s\nwant\n%s", fs[0].Explanation, want)
	}
	dt.Check(t, fs, "unanswered-requests", dt.Want{Severity: detectors.Info,
		Detail:  &unansweredrequests.Pending{Counted: unansweredrequests.Counted{Requests: 3, Connections: 3, ByReason: map[string]int64{"in_flight": 1, "one_sided": 1, "capture_gaps": 1, "long_poll": 0}}},
		Summary: []string{"3 request(s) without a response that may yet have been answered (Produce 2, ListOffsets 1)"}})
}
