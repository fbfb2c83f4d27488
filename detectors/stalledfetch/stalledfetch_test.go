package stalledfetch_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/stalledfetch"
	"github.com/kfsniff/kfsniff/flows"
)

// stuck: a consumer at 10.3.0.5 fetching payments-3 at offset 100 n
// times, step apart; every answer brings nothing though the high
// watermark is 500.
func stuck(h *dt.Harness, n int, step time.Duration) {
	c := h.Conn("10.3.0.5:41000", "10.3.0.1:9092")
	dt.Every(h, c, "stuck-consumer", n, 0, step, 2*time.Millisecond,
		func(int) (kmsg.Request, kmsg.Response) {
			return dt.ConsumerFetch("payments", 3, 100, 0), dt.ConsumerFetched("payments", 3, 0, 500, 500, -1, -1, nil)
		})
}

// erring: client id's fetches of payments-3 at offset 40 on c, n of them
// step apart, each answered code with high watermark hw (Kafka sends -1
// with an error).
func erring(h *dt.Harness, c *flows.Conn, id string, n int, step time.Duration, offset int64, code int16, hw int64) {
	dt.Every(h, c, id, n, 0, step, time.Millisecond, func(int) (kmsg.Request, kmsg.Response) {
		return dt.ConsumerFetch("payments", 3, offset, 0), dt.ConsumerFetched("payments", 3, code, hw, hw, -1, -1, nil)
	})
}

// stuckThen: a consumer at 10.3.0.5 fetching payments-3 at offset 100 n
// times, step apart, each answered KAFKA_STORAGE_ERROR though the log has
// data; if heal > 0, the fetch answered heal after the first was sent
// brings records.
func stuckThen(h *dt.Harness, n int, step, heal time.Duration) {
	c := h.Conn("10.3.0.5:41010", "10.3.0.1:9092")
	erring(h, c, "stuck-consumer", n, step, 100, 56, -1)
	if heal > 0 {
		h.Call(c, dt.At(heal-time.Millisecond), time.Millisecond, "stuck-consumer", dt.ConsumerFetch("payments", 3, 100, 0),
			dt.ConsumerFetched("payments", 3, 0, 500, 500, -1, -1, dt.StoredBatch(100, 10)))
	}
}

// policy are the severity policy's boundaries on a consumer stuck on an
// error.
var policy = []dt.Case{
	{
		Name:    "stuck 8.5 s on KAFKA_STORAGE_ERROR, then records: a warning",
		Traffic: func(h *dt.Harness) { stuckThen(h, 9, time.Second, 8500*time.Millisecond) },
		Want: []dt.Want{{
			Severity: detectors.Warning,
			Summary: []string{"stuck-consumer (10.3.0.5) is stuck at offset 100 of payments-3: 9 fetches in 8.0 s brought 0 records " +
				"(high watermark unknown, KAFKA_STORAGE_ERROR x9); moving again 8.5 s after the first stuck fetch"},
			Detail: &stalledfetch.Finding{
				Fetches: 9, ErrorResponses: 9, HeldS: 8.5, Ongoing: false, Duration: 8.001,
			}, Exact: []string{"Ongoing"},
		}},
		Explanation: []string{"A fetch moved it again 8.5 s after the first stuck one: that long the consumption was held up."},
	},
	{
		Name: "an error answer's high watermark (0 from kfake, -1 from Kafka) is not taken for one",
		Traffic: func(h *dt.Harness) {
			erring(h, h.Conn("10.3.0.5:41020", "10.3.0.1:9092"), "kfake-consumer", 8, 600*time.Millisecond, 40, 56, 0)
		},
		Want: []dt.Want{{Severity: detectors.Warning, Detail: &stalledfetch.Finding{
			HighWatermark: int64(-1), HeldS: 4.201, Ongoing: true,
		},
			Summary: []string{"(high watermark unknown, KAFKA_STORAGE_ERROR x8)"}}},
	},
	{
		Name: "near miss: a consumer fetching a deleted topic's id (UNKNOWN_TOPIC_ID) is topic-recreated's, not a stall",
		Traffic: func(h *dt.Harness) {
			erring(h, h.Conn("10.3.0.5:41030", "10.3.0.1:9092"), "old-id-consumer", 40, 500*time.Millisecond, 40, 100, -1)
		},
	},
	{
		Name:    "near miss of 30 s (LongAfter): stuck 29 s, then records: a warning",
		Traffic: func(h *dt.Harness) { stuckThen(h, 29, time.Second, 29*time.Second) },
		Want:    []dt.Want{{Severity: detectors.Warning, Detail: &stalledfetch.Finding{HeldS: 29.0}}},
	},
	{
		Name:    "stuck 31 s, then records: an error (LongAfter)",
		Traffic: func(h *dt.Harness) { stuckThen(h, 31, time.Second, 31*time.Second) },
		Want:    []dt.Want{{Severity: detectors.Error, Detail: &stalledfetch.Finding{HeldS: 31.0}}},
	},
	{
		Name:    "near miss of 10 s still stuck at the end (HealAfter): 9 s, a warning",
		Traffic: func(h *dt.Harness) { stuckThen(h, 19, 500*time.Millisecond, 0) },
		Want: []dt.Want{{Severity: detectors.Warning, Detail: &stalledfetch.Finding{
			HeldS: 9.001, Ongoing: true,
		}, Summary: []string{"still stuck when the capture ended"}}},
	},
	{
		Name:    "still stuck at the end after 11 s: an error (HealAfter)",
		Traffic: func(h *dt.Harness) { stuckThen(h, 23, 500*time.Millisecond, 0) },
		Want:    []dt.Want{{Severity: detectors.Error, Detail: &stalledfetch.Finding{HeldS: 11.001, Ongoing: true}}},
	},
	{
		Name:    "near miss: records more than 10 s after the last stuck fetch (the consumer had paused) do not stretch the stall",
		Traffic: func(h *dt.Harness) { stuckThen(h, 9, 250*time.Millisecond, 30*time.Second) },
	},
}

func TestStalledFetch(t *testing.T) {
	dt.Run(t, stalledfetch.Analyzer, slices.Concat([]dt.Case{
		{
			// kraft-listener-conflict: a broker's replica fetcher asks by
			// topic id and never for Metadata; a producer's Metadata names
			// the topic 0.6 s after the fetcher's first refusal.
			Name: "a stall begun by topic id before any Metadata named the topic goes on under the name: one stall",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.6:41000", "10.3.0.1:9092")
				byID := func(int) (kmsg.Request, kmsg.Response) {
					req, resp := dt.ConsumerFetch("", 3, 40, 0), dt.ConsumerFetched("", 3, 6, -1, -1, 2, 9, nil)
					req.Version, req.Topics[0].TopicID = 13, [16]byte{7}
					resp.Version, resp.Topics[0].TopicID = 13, [16]byte{7}
					return req, resp
				}
				dt.Every(h, c, "replica-fetcher", 3, 0, time.Second, time.Millisecond, byID)
				req, resp := dt.MetadataLeader("payments", 2, 9, []string{"1@10.3.0.1:9092", "2@10.3.0.2:9092"}, 3)
				resp.Topics[0].TopicID = [16]byte{7}
				h.Call(h.Conn("10.3.0.7:41001", "10.3.0.1:9092"), dt.At(2500*time.Millisecond), time.Millisecond, "producer", req, resp)
				dt.Every(h, c, "replica-fetcher", 10, 3*time.Second, time.Second, time.Millisecond, byID)
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"replica-fetcher (10.3.0.6) is stuck at offset 40 of payments-3: 13 fetches in 12.0 s"},
				Detail:   &stalledfetch.Finding{Fetches: 13, Fields: peers.Fields{Topic: "payments", Partition: int32(3)}},
			}},
		},
		{
			Name:    "consumer behind the high watermark gets nothing back, still stuck after 19.5 s at the end: an error",
			Traffic: func(h *dt.Harness) { stuck(h, 40, 500*time.Millisecond) },
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary: []string{"stuck-consumer (10.3.0.5) is stuck at offset 100 of payments-3: 40 fetches in 19.5 s brought 0 records " +
					"though the high watermark 500"},
				Detail: &stalledfetch.Finding{
					Fetches: 40, Records: 0, ErrorResponses: 0, FetchOffset: int64(100),
					HighWatermark: int64(500), Role: "consumer", Servers: []string{"10.3.0.1:9092"},
					Duration: 19.502, HeldS: 19.502, Ongoing: true, Rate: 2.05,
					Fields: peers.Fields{Client: "10.3.0.5", ClientID: "stuck-consumer", Topic: "payments", Partition: int32(3)},
				}, Exact: []string{"Records", "ErrorResponses"},
				Evidence: []uint64{2, 80},
			}},
			Explanation: []string{"no answer carried an error, yet the high watermark stayed at 500, 400 records ahead of it",
				"the consumption of this partition is not advancing", "It was still stuck when the capture ended, 19.5 s after its first stuck fetch."},
			Next: []string{"kafka-consumer-groups.sh --describe --group <group> (CURRENT-OFFSET 100 vs LOG-END-OFFSET for payments-3)"},
		},
		{
			Name: "raft observer answered with errors, high watermark unknown",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.9:41100", "10.3.0.2:9093")
				dt.Every(h, c, "raft-client-9", 30, 0, time.Second, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.RaftFetch(9, 777, 3), dt.RaftFetched(6, -1, 1, 3, "10.3.0.3", 9093, nil)
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary: []string{"raft-client-9 (node 9, 10.3.0.9) is stuck at offset 777 of __cluster_metadata-0: 30 fetches in 29.0 s " +
					"brought 0 records (high watermark unknown, NOT_LEADER_OR_FOLLOWER x30)"},
				Detail: &stalledfetch.Finding{
					Fetches: 30, Records: 0, ErrorResponses: 30, FetchOffset: int64(777),
					HighWatermark: int64(-1), Error: "NOT_LEADER_OR_FOLLOWER", Role: "raft",
					Fields: peers.Fields{Topic: "__cluster_metadata"},
				}, Exact: []string{"Records"},
			}},
			Nodes:       []int32{9},
			Explanation: []string{"every answer was an error (NOT_LEADER_OR_FOLLOWER x30) and none reported a high watermark", "metadata replication"},
			Next:        []string{"kafka-metadata-quorum.sh describe --replication (node 9's LogEndOffset"},
		},
		{
			Name: "a follower's replica fetches, some errors",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.12:41700", "10.3.0.1:9092")
				dt.Every(h, c, "broker-2-fetcher-0", 25, 0, 500*time.Millisecond, time.Millisecond,
					func(i int) (kmsg.Request, kmsg.Response) {
						req := dt.ConsumerFetch("payments", 0, 60, 0)
						req.ReplicaID = 2
						if i%5 == 0 {
							return req, dt.ConsumerFetched("payments", 0, 74, -1, -1, -1, -1, nil)
						}
						return req, dt.ConsumerFetched("payments", 0, 0, 90, 90, -1, -1, nil)
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"broker-2-fetcher-0 (node 2, 10.3.0.12)", "(high watermark 90, FENCED_LEADER_EPOCH x5)"},
				Detail: &stalledfetch.Finding{
					Fetches: 25, ErrorResponses: 5, Role: "replication", Error: "FENCED_LEADER_EPOCH",
					HighWatermark: int64(90),
				},
			}},
			Nodes:       []int32{2},
			Explanation: []string{"5 answers were errors (FENCED_LEADER_EPOCH x5); the high watermark stayed at 90", "the replication of this partition"},
			Next:        []string{"kafka-topics.sh --describe --topic payments (is the follower still in the ISR?)", "FetcherLagMetrics on node 2"},
		},
		{
			Name: "consumer in an incremental fetch session keeps getting an error",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.4:41050", "10.3.0.1:9092")
				dt.Every(h, c, "session-consumer", 30, 0, 500*time.Millisecond, time.Millisecond,
					func(i int) (kmsg.Request, kmsg.Response) {
						req := dt.ConsumerFetch("payments", 1, 600, 0)
						req.SessionID, req.SessionEpoch = 77, int32(i)
						// The full fetch that opens the session finds the
						// consumer caught up; the errors start with the
						// incremental ones, which name no partition: the
						// offset has not changed.
						resp := dt.ConsumerFetched("payments", 1, 0, 600, 600, -1, -1, nil)
						if i > 0 {
							req.Topics = nil
							resp = dt.ConsumerFetched("payments", 1, 6, -1, -1, -1, -1, nil)
						}
						resp.SessionID = 77
						return req, resp
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &stalledfetch.Finding{
					Fetches: 29, ErrorResponses: 29, FetchOffset: int64(600), Error: "NOT_LEADER_OR_FOLLOWER",
					Fields: peers.Fields{Partition: int32(1)},
				},
			}},
			Next: []string{"(NOT_LEADER_OR_FOLLOWER: act on it, e.g. the leader it names)"},
		},
		{
			Name: "read_committed consumer held behind the last stable offset, throttled",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.8:41650", "10.3.0.1:9092")
				dt.Every(h, c, "txn-reader", 30, 0, 500*time.Millisecond, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						resp := dt.ConsumerFetched("payments", 0, 0, 350, 320, -1, -1, nil)
						resp.ThrottleMillis = 10
						return dt.ConsumerFetch("payments", 0, 300, 1), resp
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &stalledfetch.Finding{
					Fetches: 30, Throttled: 30, Isolation: "read_committed",
					LastStableOffset: dt.Ptr[int64](int64(320)), HighWatermark: int64(350),
				},
			}},
			Explanation: []string{"the last stable offset stayed at 320, 20 records ahead of it"},
		},
		{
			Name: "near miss: idle consumer caught up with the high watermark",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.6:41200", "10.3.0.1:9092")
				dt.Every(h, c, "idle-consumer", 120, 0, 500*time.Millisecond, 500*time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("payments", 0, 4242, 0), dt.ConsumerFetched("payments", 0, 0, 4242, 4242, -1, -1, nil)
					})
			},
		},
		{
			Name: "near miss: idle consumer after one transient error",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.6:41300", "10.3.0.1:9092")
				dt.Every(h, c, "idle-consumer", 61, 0, 500*time.Millisecond, 400*time.Millisecond,
					func(i int) (kmsg.Request, kmsg.Response) {
						if i == 0 {
							return dt.ConsumerFetch("payments", 0, 4242, 0), dt.ConsumerFetched("payments", 0, 6, -1, -1, 1, 2, nil)
						}
						return dt.ConsumerFetch("payments", 0, 4242, 0), dt.ConsumerFetched("payments", 0, 0, 4242, 4242, -1, -1, nil)
					})
			},
		},
		{
			Name: "near miss: consumer reading a backlog advances",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.7:41400", "10.3.0.1:9092")
				dt.Every(h, c, "busy-consumer", 60, 0, 300*time.Millisecond, time.Millisecond,
					func(i int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("payments", 0, int64(1000+10*i), 0), dt.ConsumerFetched("payments", 0, 0, 5000, 5000, -1, -1, dt.StoredBatch(int64(1000+10*i), 10))
					})
			},
		},
		{
			Name: "near miss: records come back though the offset does not move (a consumer re-reading)",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.7:41450", "10.3.0.1:9092")
				dt.Every(h, c, "rereader", 60, 0, 300*time.Millisecond, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("payments", 0, 1000, 0), dt.ConsumerFetched("payments", 0, 0, 5000, 5000, -1, -1, dt.StoredBatch(1000, 1))
					})
			},
		},
		{
			Name: "near miss: high watermark moves each fetch (producer appending)",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.7:41500", "10.3.0.1:9092")
				dt.Every(h, c, "slow-poll", 60, 0, 300*time.Millisecond, time.Millisecond,
					func(i int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("payments", 0, 900, 0), dt.ConsumerFetched("payments", 0, 0, int64(1000+i), int64(1000+i), -1, -1, nil)
					})
			},
		},
		{
			Name: "near miss: read_committed consumer waits on an open transaction",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.3.0.8:41600", "10.3.0.1:9092")
				dt.Every(h, c, "txn-reader", 60, 0, 500*time.Millisecond, 500*time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("payments", 0, 300, 1), dt.ConsumerFetched("payments", 0, 0, 350, 300, -1, -1, nil)
					})
			},
		},
		{
			Name:     "min-fetches raised above what the consumer sent",
			Settings: map[string]string{"min-fetches": "41"},
			Traffic:  func(h *dt.Harness) { stuck(h, 40, 500*time.Millisecond) },
		},
		{
			Name:     "a short stall is reported once min-duration is lowered (a bare number is in seconds); under 3 s, info",
			Settings: map[string]string{"min-duration": "1"},
			Traffic:  func(h *dt.Harness) { stuck(h, 10, 200*time.Millisecond) },
			Want:     []dt.Want{{Severity: detectors.Info, Detail: &stalledfetch.Finding{Fetches: 10, HeldS: 1.802}}},
		},
		{
			Name: "many short stalls then a long one: the long one alone, with only its own servers",
			Traffic: func(h *dt.Harness) {
				a := h.Conn("10.3.0.5:41800", "10.3.0.1:9092")
				b := h.Conn("10.3.0.5:41801", "10.3.0.2:9092")
				at := time.Duration(0)
				for k := range 40 { // each stuck 3 times at its own offset, then caught up
					for i := range 4 {
						hw := int64(1000 + k)
						if i == 3 {
							hw = int64(k)
						}
						h.Call(a, dt.At(at), time.Millisecond, "bursty", dt.ConsumerFetch("payments", 0, int64(k), 0),
							dt.ConsumerFetched("payments", 0, 0, hw, hw, -1, -1, nil))
						at += 100 * time.Millisecond
					}
				}
				dt.Every(h, b, "bursty", 21, at, 600*time.Millisecond, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("payments", 0, 40, 0), dt.ConsumerFetched("payments", 0, 0, 70, 70, -1, -1, nil)
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &stalledfetch.Finding{
					Fetches: 21, ErrorResponses: 0, FetchOffset: int64(40), Servers: []string{"10.3.0.2:9092"},
					Duration: 12.001,
				}, Exact: []string{"ErrorResponses"},
			}},
		},
	},
		policy,
		dt.Edge("held up 3 s (the policy's FeltAfter): stuck 3.1 s, then records", nil,
			dt.Want{Severity: detectors.Warning, Detail: &stalledfetch.Finding{
				Fetches: 15, ErrorResponses: 15, HeldS: 3.1, Ongoing: false, Error: "KAFKA_STORAGE_ERROR",
			}, Exact: []string{"Ongoing"}},
			func(h *dt.Harness) { stuckThen(h, 15, 200*time.Millisecond, 3100*time.Millisecond) },
			func(h *dt.Harness) { stuckThen(h, 15, 200*time.Millisecond, 2900*time.Millisecond) }),
		dt.Edge("min-fetches (2 stuck fetches 2 s apart, as sarama retries, then records at 4 s)", nil,
			dt.Want{Severity: detectors.Warning, Detail: &stalledfetch.Finding{Fetches: 2, HeldS: 4.0}},
			func(h *dt.Harness) { stuckThen(h, 2, 2*time.Second, 4*time.Second) },
			func(h *dt.Harness) { stuckThen(h, 1, 2*time.Second, 4*time.Second) }),
	), nil)
}
