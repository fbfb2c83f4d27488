package notleaderloop_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/detectors/notleaderloop"
	"github.com/kfsniff/kfsniff/flows"
)

const rule = "not-leader-loop"

var brokers = []string{"1@10.1.0.1:9092", "2@10.1.0.2:9092", "3@10.1.0.3:9092"}

// produceLoop: client id at 10.1.7.7 produces to events-0 on 10.1.0.2
// n times, step apart, each answered NOT_LEADER_OR_FOLLOWER naming
// broker 2 itself (v10).
func produceLoop(h *dt.Harness, n int, step time.Duration) {
	p := h.Conn("10.1.7.7:52000", "10.1.0.2:9092")
	dt.Every(h, p, "kgo", n, 0, step, time.Millisecond,
		func(int) (kmsg.Request, kmsg.Response) {
			return dt.ProduceTo(10, "events", 0), dt.ProducedTo(10, "events", 6, 2, 7, "10.1.0.2", 9092, 0)
		})
}

// legacyLoop: a client at 10.1.9.9 whose Produce v7 to t-0 is answered
// NOT_LEADER_OR_FOLLOWER n times, step apart, nothing naming a leader.
func legacyLoop(h *dt.Harness, n int, step time.Duration) {
	p := h.Conn("10.1.9.9:54000", "10.1.0.2:9092")
	dt.Every(h, p, "legacy", n, 0, step, time.Millisecond,
		func(int) (kmsg.Request, kmsg.Response) {
			return dt.ProduceTo(7, "t", 0), dt.ProducedTo(7, "t", 6, -1, -1, "", 0, 0)
		})
}

// kafkajs: a slow retrier refreshing Metadata (from 10.1.0.3) that names
// broker 1 leader of events-0 every 4 s for a minute, and producing to
// broker 1, which answers NOT_LEADER_OR_FOLLOWER with no hint (v7).
func kafkajs(h *dt.Harness) {
	m := h.Conn("10.1.6.6:51000", "10.1.0.3:9092")
	p := h.Conn("10.1.6.6:51001", "10.1.0.1:9092")
	for i := range 15 {
		t := time.Duration(i) * 4 * time.Second
		req, resp := dt.MetadataLeader("events", 1, 4, brokers, 0)
		h.Call(m, dt.At(t), 2*time.Millisecond, "kafkajs", req, resp)
		h.Call(p, dt.At(t+10*time.Millisecond), 2*time.Millisecond, "kafkajs", dt.ProduceTo(7, "events", 0), dt.ProducedTo(7, "events", 6, -1, -1, "", 0, 0))
	}
}

// burst: 40 NOT_LEADER_OR_FOLLOWER answers in 2 s, no hint, as during an
// election.
func burst(h *dt.Harness, c *flows.Conn) {
	dt.Every(h, c, "burst", 40, 0, 50*time.Millisecond, time.Millisecond,
		func(int) (kmsg.Request, kmsg.Response) {
			return dt.ProduceTo(9, "orders", 0), dt.ProducedTo(9, "orders", 6, -1, -1, "", 0, 0)
		})
}

// metaLoop: an application at 10.1.2.2 refreshing Metadata (from broker
// 3) that names broker 1 leader of events' partitions parts at epoch 4
// before each Produce to broker 1, which answers NOT_LEADER_OR_FOLLOWER
// with no hint (v9): n of them, step apart. If heal > 0, the Produce
// answered heal after the first one was sent succeeds.
func metaLoop(h *dt.Harness, n int, step, heal time.Duration, parts ...int32) {
	m := h.Conn("10.1.2.2:50100", "10.1.0.3:9092")
	p := h.Conn("10.1.2.2:50101", "10.1.0.1:9092")
	const first = 2 * time.Millisecond
	for i := range n {
		t := time.Duration(i) * step
		req, resp := dt.MetadataLeader("events", 1, 4, brokers, parts...)
		h.Call(m, dt.At(t), time.Millisecond, "app", req, resp)
		h.Call(p, dt.At(t+first), time.Millisecond, "app", dt.ProduceTo(9, "events", parts...), dt.ProducedTo(9, "events", 6, -1, -1, "", 0, parts...))
	}
	if heal > 0 {
		h.Call(p, dt.At(first+heal-time.Millisecond), time.Millisecond, "app", dt.ProduceTo(9, "events", parts...),
			dt.ProducedTo(9, "events", 0, -1, -1, "", 0, parts...))
	}
}

// policy are the severity policy's boundaries on the loop of Metadata
// naming the refusing broker, and the leadership changes clients follow.
var policy = []dt.Case{
	{
		Name:    "the issue's case: 8.5 s refused on three partitions, 8 retries each after a Metadata refresh, then written: one warning",
		Traffic: func(h *dt.Harness) { metaLoop(h, 9, time.Second, 8500*time.Millisecond, 0, 1, 2) },
		Want: []dt.Want{{
			Severity: detectors.Warning,
			Summary: []string{"metadata names broker 1 as leader of events-0 but it answers NOT_LEADER_OR_FOLLOWER: app (10.1.2.2) retried it 9 times in 8.0 s",
				"a success 8.5 s after the first refusal", "[3 partitions: 0, 1, 2]"},
			Detail: &notleaderloop.Finding{
				Requests: 27, NotLeaderResponses: 27, RequestsToLeader: dt.Ptr[int64](27),
				Partitions: []int32{0, 1, 2}, NotLeaderPerPartition: []int64{9, 9, 9}, HeldS: 8.5,
				Ongoing: false, Shape: notleaderloop.ShapeMetaSelf, LeaderID: int32(1),
				LeaderSource: "metadata",
			}, Exact: []string{"Ongoing", "Shape"},
		}},
		Nodes:       []int32{1},
		Explanation: []string{"A success ended the loop 8.5 s after the first refused request: that long the client was held up."},
	},
	{
		Name:    "near miss of 30 s (LongAfter): refused 29 s, then written: a warning",
		Traffic: func(h *dt.Harness) { metaLoop(h, 29, time.Second, 29*time.Second, 0) },
		Want: []dt.Want{{Severity: detectors.Warning, Detail: &notleaderloop.Finding{
			HeldS: 29.0, Ongoing: false,
		}, Exact: []string{"Ongoing"}}},
	},
	{
		Name:    "refused 31 s, then written: an error (LongAfter)",
		Traffic: func(h *dt.Harness) { metaLoop(h, 31, time.Second, 31*time.Second, 0) },
		Want: []dt.Want{{Severity: detectors.Error, Detail: &notleaderloop.Finding{
			HeldS: 31.0, Ongoing: false,
		}, Exact: []string{"Ongoing"}}},
	},
	{
		Name:    "near miss of 10 s still refused at the end (HealAfter): 9 s, a warning",
		Traffic: func(h *dt.Harness) { metaLoop(h, 19, 500*time.Millisecond, 0, 0) },
		Want: []dt.Want{{Severity: detectors.Warning, Detail: &notleaderloop.Finding{
			HeldS: 9.001, Ongoing: true,
		}, Summary: []string{"still refused when the capture ended"}}},
	},
	{
		Name:    "still refused at the end after 11 s: an error (HealAfter)",
		Traffic: func(h *dt.Harness) { metaLoop(h, 23, 500*time.Millisecond, 0, 0) },
		Want:    []dt.Want{{Severity: detectors.Error, Detail: &notleaderloop.Finding{HeldS: 11.001, Ongoing: true}}},
	},
	{
		Name:    "near miss: a success long after the last refusal (the client had gone quiet) does not stretch the loop",
		Traffic: func(h *dt.Harness) { metaLoop(h, 9, 250*time.Millisecond, 30*time.Second, 0) },
	},
	{
		Name:    "near miss: the leader moves and the client follows the new Metadata within 500 ms",
		Traffic: func(h *dt.Harness) { leaderMove(h, "follower", 10, 50*time.Millisecond) },
	},
	{
		Name:    "the same move, followed in 500 ms by a client retrying without backoff: a burst, a warning for the misconfiguration",
		Traffic: func(h *dt.Harness) { leaderMove(h, "nobackoff", 500, time.Millisecond) },
		Want: []dt.Want{{Severity: detectors.Warning, Detail: &notleaderloop.Finding{
			NotLeaderResponses: 500, Ongoing: false,
		}, Exact: []string{"Ongoing"}}},
		Explanation: []string{"That is short, but 500 refusals in it", "mean the client retries without backoff", "KIP-580"},
	},
}

// leaderMove: leadership of events-0 moves from broker 1 to broker 2; for
// n retries, step apart, the Metadata the client refreshes still names
// broker 1, which refuses; then Metadata names broker 2 and the client
// produces there for 10 s.
func leaderMove(h *dt.Harness, clientID string, n int, step time.Duration) {
	m := h.Conn("10.1.2.5:50200", "10.1.0.3:9092")
	old := h.Conn("10.1.2.5:50201", "10.1.0.1:9092")
	nw := h.Conn("10.1.2.5:50202", "10.1.0.2:9092")
	var at time.Duration
	for range n {
		req, resp := dt.MetadataLeader("events", 1, 4, brokers, 0)
		h.Call(m, dt.At(at), 100*time.Microsecond, clientID, req, resp)
		h.Call(old, dt.At(at+200*time.Microsecond), 300*time.Microsecond, clientID, dt.ProduceTo(9, "events", 0), dt.ProducedTo(9, "events", 6, -1, -1, "", 0, 0))
		at += step
	}
	req, resp := dt.MetadataLeader("events", 2, 5, brokers, 0)
	h.Call(m, dt.At(at), time.Millisecond, clientID, req, resp)
	dt.Every(h, nw, clientID, 20, at+2*time.Millisecond, 500*time.Millisecond, time.Millisecond,
		func(int) (kmsg.Request, kmsg.Response) {
			return dt.ProduceTo(9, "events", 0), dt.ProducedTo(9, "events", 0, -1, -1, "", 0, 0)
		})
}

// TestNotLeaderLoop builds each shape of the loop, the ways real clients
// retry, and the near misses a leadership change makes.
func TestNotLeaderLoop(t *testing.T) {
	dt.Run(t, notleaderloop.Analyzer, slices.Concat([]dt.Case{
		{
			Name: "KRaft observer ignores the leader named by two controllers (KAFKA-19354)",
			Traffic: func(h *dt.Harness) {
				a := h.Conn("10.2.0.7:40001", "10.2.0.11:9093")
				b := h.Conn("10.2.0.7:40002", "10.2.0.12:9093")
				for i := range 60 {
					c := a
					if i%3 == 2 {
						c = b
					}
					h.Call(c, dt.At(time.Duration(i)*250*time.Millisecond), time.Millisecond, "raft-client-7",
						dt.RaftFetch(7, 9000, 12), dt.RaftFetched(6, -1, 3000, 12, "10.2.0.13", 9093, nil))
				}
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary: []string{"raft-client-7 (10.2.0.7) loops Fetch of __cluster_metadata-0 on 2 non-leader controller(s): 60 NOT_LEADER_OR_FOLLOWER",
					"naming leader node 3000 (10.2.0.13:9093) epoch 12", "KAFKA-19354"},
				Detail: &notleaderloop.Finding{
					Requests: 60, NotLeaderResponses: 60, RequestsToLeader: dt.Ptr[int64](0),
					Error: "NOT_LEADER_OR_FOLLOWER", LeaderID: int32(3000),
					LeaderEpoch: dt.Ptr[int32](int32(12)), LeaderEndpoint: "10.2.0.13:9093",
					LeaderSource: "response", FetchOffset: dt.Ptr[int64](int64(9000)),
					ReplicaID: dt.Ptr[int32](int32(7)), ReplicaEpoch: dt.Ptr[int64](int64(-1)),
					KnownIssue: "KAFKA-19354", Shape: notleaderloop.ShapeHintIgnored,
					Servers: []string{"10.2.0.11:9093", "10.2.0.12:9093"},
					Fields:  peers.Fields{Client: "10.2.0.7", ClientID: "raft-client-7", Topic: "__cluster_metadata", Partition: int32(0)},
				}, Exact: []string{"Partition", "Shape"},
				Evidence: []uint64{2, 120},
			}},
			Nodes: []int32{7, 3000},
			Explanation: []string{"raft-client-7 (10.2.0.7), replica 7 epoch -1, sent 60 Fetch requests for __cluster_metadata-0 at fetchOffset 9000 " +
				"over 14.8 s (4.1/s): 40 to 10.2.0.11:9093, 20 to 10.2.0.12:9093. All 60 answers were NOT_LEADER_OR_FOLLOWER and named the " +
				"same leader, node 3000 (10.2.0.13:9093), at epoch 12, yet not one request went to the leader.", "This is the pattern of KAFKA-19354"},
			Next: []string{"kafka-metadata-quorum.sh --bootstrap-controller 10.2.0.13:9093 describe --status", "node 7's LogEndOffset and Lag"},
		},
		{
			// Apache Kafka 4.1.1 with broker 3's path to the active controller
			// cut (fixtures/pcaps/kafka/kraft-observer-loop): the raft fetch to
			// the leader is never answered, the reconnects' SYNs neither, and
			// meanwhile the bootstrap controllers name the leader. The client
			// did try the leader: not KAFKA-19354's loop, a path that is down.
			Name: "KRaft observer that cannot reach the leader the controllers name",
			Traffic: func(h *dt.Harness) {
				lead := h.Conn("10.2.0.7:40000", "10.2.0.13:9093")
				q, _ := h.Call(lead, dt.At(0), 0, "raft-client-7", dt.RaftFetch(7, 9000, 12), nil)
				a := h.Conn("10.2.0.7:40001", "10.2.0.11:9093")
				b := h.Conn("10.2.0.7:40002", "10.2.0.12:9093")
				for i := range 60 {
					c := a
					if i%3 == 2 {
						c = b
					}
					h.Call(c, dt.At(2*time.Second+time.Duration(i)*250*time.Millisecond), time.Millisecond, "raft-client-7",
						dt.RaftFetch(7, 9000, 12), dt.RaftFetched(6, -1, 3000, 12, "10.2.0.13", 9093, nil))
				}
				for i := range 2 {
					h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnUnanswered, Client: netip.MustParseAddrPort(fmt.Sprintf("10.2.0.7:4100%d", i)),
						Server: netip.MustParseAddrPort("10.2.0.13:9093"), Time: dt.At(4*time.Second + time.Duration(i)*5*time.Second), Attempts: 7})
				}
				h.Unanswered(lead, q)
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary: []string{"raft-client-7 (10.2.0.7) cannot reach leader node 3000 (10.2.0.13:9093) of __cluster_metadata-0: " +
					"2 connection attempts never answered (14 SYNs) and 1 request to it never answered, while 2 other server(s) answered NOT_LEADER_OR_FOLLOWER naming it 60 times"},
				Detail: &notleaderloop.Finding{
					Requests: 61, Unanswered: 1, NotLeaderResponses: 60, RequestsToLeader: dt.Ptr[int64](0),
					UnansweredConnectsToLeader: dt.Ptr[int64](2), RefusedConnectsToLeader: dt.Ptr[int64](0),
					UnansweredRequestsToLeader: dt.Ptr[int64](1), Shape: notleaderloop.ShapeUnreachable,
					LeaderID: int32(3000),
				}, Exact: []string{"Shape"},
			}},
			Nodes:       []int32{7, 3000},
			Explanation: []string{"The client did try the leader", "this is not the KAFKA-19354 bug"},
			Next:        []string{"nc -vz 10.2.0.13 9093"},
		},
		{
			Name: "near miss for the unreachable leader: the unanswered attempts were from another host",
			Traffic: func(h *dt.Harness) {
				a := h.Conn("10.2.0.7:40001", "10.2.0.11:9093")
				for i := range 60 {
					h.Call(a, dt.At(2*time.Second+time.Duration(i)*250*time.Millisecond), time.Millisecond, "raft-client-7",
						dt.RaftFetch(7, 9000, 12), dt.RaftFetched(6, -1, 3000, 12, "10.2.0.13", 9093, nil))
				}
				h.ConnEvent(&flows.ConnEvent{Kind: flows.ConnUnanswered, Client: netip.MustParseAddrPort("10.2.0.8:41000"),
					Server: netip.MustParseAddrPort("10.2.0.13:9093"), Time: dt.At(4 * time.Second), Attempts: 7})
			},
			Want: []dt.Want{{Severity: detectors.Error, Detail: &notleaderloop.Finding{
				Shape: notleaderloop.ShapeHintIgnored, KnownIssue: "KAFKA-19354",
			}, Exact: []string{"Shape"}}},
		},
		{
			// Apache Kafka 4.1.1 with broker 3 advertising broker 2's listener
			// (fixtures/pcaps/kafka/kraft-listener-conflict): Metadata names
			// node 3 as leader at 10.1.0.2:9092, where broker 2 answers.
			Name: "the leader's endpoint is advertised by two nodes",
			Traffic: func(h *dt.Harness) {
				shared := []string{"1@10.1.0.1:9092", "2@10.1.0.2:9092", "3@10.1.0.2:9092"}
				m := h.Conn("10.1.2.2:50100", "10.1.0.1:9092")
				p := h.Conn("10.1.2.2:50101", "10.1.0.2:9092")
				for i := range 12 {
					t := time.Duration(i) * time.Second
					req, resp := dt.MetadataLeader("events", 3, 4, shared, 0)
					h.Call(m, dt.At(t), time.Millisecond, "app", req, resp)
					h.Call(p, dt.At(t+2*time.Millisecond), time.Millisecond, "app", dt.ProduceTo(9, "events", 0), dt.ProducedTo(9, "events", 6, -1, -1, "", 0, 0))
				}
			},
			Want: []dt.Want{{
				Severity: detectors.Error, // still refused at the end, after 11 s
				Summary:  []string{"app (10.1.2.2) is sent to node 3 (10.1.0.2:9092) for events-0, an endpoint nodes 2, 3 all advertise"},
				Detail:   &notleaderloop.Finding{Shape: notleaderloop.ShapeShared, LeaderID: int32(3)}, Exact: []string{"Shape"},
			}},
			Explanation: []string{"This is an advertised-listener conflict"},
			Next:        []string{"Compare advertised.listeners of nodes 2, 3"},
		},
		{
			// Apache Kafka 4.1.1's election stall (kraft-election-stall): a restarted
			// controller answered 3 of a raft client's thousands of fetches naming itself;
			// the summary's rate is of those 3, not of the whole run.
			Name: "a leader naming itself in 3 answers of a long run: the rate is of those",
			Traffic: func(h *dt.Harness) {
				a := h.Conn("10.2.0.7:40001", "10.2.0.11:9093")
				self := h.Conn("10.2.0.7:40002", "10.2.0.13:9093")
				for i := range 60 {
					h.Call(a, dt.At(time.Duration(i)*250*time.Millisecond), time.Millisecond, "raft-client-7",
						dt.RaftFetch(7, 9000, 12), dt.RaftFetched(6, -1, 3000, 12, "10.2.0.13", 9093, nil))
				}
				for i := range 3 {
					h.Call(self, dt.At(15*time.Second+time.Duration(i)*time.Second), time.Millisecond, "raft-client-7",
						dt.RaftFetch(7, 9000, 12), dt.RaftFetched(6, -1, 3000, 12, "10.2.0.13", 9093, nil))
				}
			},
			Want: []dt.Want{{
				Severity: detectors.Error, // still refused at the end, after 17 s
				Summary:  []string{"retried it 3 times in 17.0 s (0.2/s)"},
				Detail:   &notleaderloop.Finding{Shape: notleaderloop.ShapeHintSelf}, Exact: []string{"Shape"},
			}},
		},
		{
			Name: "consumer keeps fetching from a follower that names the leader (FENCED_LEADER_EPOCH)",
			Traffic: func(h *dt.Harness) {
				m := h.Conn("10.1.5.5:50000", "10.1.0.1:9092")
				req, resp := dt.MetadataLeader("orders", 2, 9, brokers, 0)
				h.Call(m, dt.At(0), time.Millisecond, "app-consumer", req, resp)
				f := h.Conn("10.1.5.5:50001", "10.1.0.1:9092")
				dt.Every(h, f, "app-consumer", 30, time.Second, time.Second, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("orders", 0, 1234, 0), dt.ConsumerFetched("orders", 0, 74, -1, -1, 2, 9, nil)
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"app-consumer (10.1.5.5) keeps sending Fetch for orders-0 to 1 non-leader(s)", "none sent to the leader"},
				Detail: &notleaderloop.Finding{
					Requests: 30, NotLeaderResponses: 30, RequestsToLeader: dt.Ptr[int64](0),
					FencedLeaderEpoch: 30, MetadataRefreshes: dt.Ptr[int64](0), Error: "FENCED_LEADER_EPOCH",
					LeaderID: int32(2), LeaderEpoch: dt.Ptr[int32](int32(9)),
					MetadataLeaderID: dt.Ptr[int32](int32(2)), LeaderEndpoint: "10.1.0.2:9092",
					FetchOffset: dt.Ptr[int64](int64(1234)), Servers: []string{"10.1.0.1:9092"},
				},
			}},
			Nodes: []int32{1, 2},
		},
		{
			Name:    "slow retrier (kafkajs-like, every 4 s for a minute): metadata names the refusing broker",
			Traffic: kafkajs,
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"metadata names broker 1 as leader of events-0 but it answers NOT_LEADER_OR_FOLLOWER: kafkajs (10.1.6.6) retried it 15 times in 56.0 s"},
				Detail: &notleaderloop.Finding{
					Requests: 15, NotLeaderResponses: 15, RequestsToLeader: dt.Ptr[int64](15),
					MetadataRefreshes: dt.Ptr[int64](14), Shape: notleaderloop.ShapeMetaSelf, LeaderID: int32(1),
					LeaderSource: "metadata", LeaderEndpoint: "10.1.0.1:9092", MetadataServer: "10.1.0.3:9092",
				}, Exact: []string{"Shape"},
			}},
			Nodes: []int32{1},
			Explanation: []string{"kafkajs (10.1.6.6) sent 15 Produce requests for events-0 over 56.0 s (0.3/s): 15 to node 1 (10.1.0.1:9092). " +
				"15 answers from node 1 (10.1.0.1:9092) itself were NOT_LEADER_OR_FOLLOWER. Yet the Metadata the client refreshed 14 times " +
				"during the run (last from node 3 (10.1.0.3:9092)) names that very broker, node 1, as leader with a stable leader id"},
			Next: []string{"kafka-topics.sh --bootstrap-server 10.1.0.1:9092 --describe --topic events (leader, ISR, leader epoch of partition 0)"},
		},
		{
			Name:    "fast retrier (kgo-like, 200/s) gets v10 answers naming the refusing broker itself",
			Traffic: func(h *dt.Harness) { produceLoop(h, 2400, 5*time.Millisecond) },
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"broker 2 answers NOT_LEADER_OR_FOLLOWER for events-0 while naming itself as leader (epoch 7): kgo (10.1.7.7) retried it 2400 times"},
				Detail: &notleaderloop.Finding{
					Requests: 2400, NotLeaderResponses: 2400, RequestsToLeader: dt.Ptr[int64](2400),
					Shape: notleaderloop.ShapeHintSelf, LeaderID: int32(2), LeaderSource: "response",
					Rate: 200.07,
				}, Exact: []string{"Shape"},
			}},
			Nodes:       []int32{2},
			Explanation: []string{"Each of those answers names node 2 itself as the leader at epoch 7, so a client that follows the hint comes straight back."},
			Next:        []string{"Compare what the cluster says with what broker 2 believes"},
		},
		{
			Name: "no-backoff retrier: 300 answers in 0.3 s are a loop however short, a warning: a misconfiguration",
			Traffic: func(h *dt.Harness) {
				m := h.Conn("10.1.7.8:52100", "10.1.0.3:9092")
				req, resp := dt.MetadataLeader("events", 2, 7, brokers, 0)
				h.Call(m, dt.At(0), time.Millisecond, "kgo-nobackoff", req, resp)
				p := h.Conn("10.1.7.8:52101", "10.1.0.2:9092")
				dt.Every(h, p, "kgo-nobackoff", 300, 10*time.Millisecond, time.Millisecond, 500*time.Microsecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ProduceTo(10, "events", 0), dt.ProducedTo(10, "events", 6, 2, 7, "10.1.0.2", 9092, 0)
					})
			},
			Want: []dt.Want{{
				Severity: detectors.Warning,
				Summary:  []string{"metadata names broker 2 as leader of events-0 but it answers NOT_LEADER_OR_FOLLOWER", "300 times in 300 ms", "still refused when the capture ended"},
				Detail: &notleaderloop.Finding{
					NotLeaderResponses: 300, MetadataRefreshes: dt.Ptr[int64](0),
					Shape: notleaderloop.ShapeMetaSelf, LeaderID: int32(2), LeaderEpoch: dt.Ptr[int32](int32(7)),
					Rate: 1001.67, HeldS: 0.3, Ongoing: true,
				}, Exact: []string{"Shape"},
			}},
		},
		{
			Name:     "the no-backoff burst is not a loop when burst-responses is off",
			Settings: map[string]string{"burst-responses": "0"},
			Traffic:  func(h *dt.Harness) { produceLoop(h, 300, time.Millisecond) },
		},
		{
			Name: "one producer stuck on three partitions of a broker is one finding",
			Traffic: func(h *dt.Harness) {
				m := h.Conn("10.1.8.8:53000", "10.1.0.2:9092")
				p := h.Conn("10.1.8.8:53001", "10.1.0.3:9092")
				for i := range 20 {
					t := time.Duration(i) * time.Second
					req, resp := dt.MetadataLeader("logs", 3, 1, brokers, 0, 1, 2)
					h.Call(m, dt.At(t), time.Millisecond, "sarama", req, resp)
					h.Call(p, dt.At(t+5*time.Millisecond), time.Millisecond, "sarama",
						dt.ProduceTo(9, "logs", 0, 1, 2), dt.ProducedTo(9, "logs", 6, -1, -1, "", 0, 0, 1, 2))
				}
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"metadata names broker 3 as leader of logs-0", "[3 partitions: 0, 1, 2]"},
				Detail: &notleaderloop.Finding{
					Requests: 60, NotLeaderResponses: 60, MetadataRefreshes: dt.Ptr[int64](57),
					Partitions: []int32{0, 1, 2}, Duration: 19.001, Rate: 3.16,
					Fields: peers.Fields{Partition: int32(0)},
				}, Exact: []string{"Partition"},
			}},
			Nodes: []int32{3},
		},
		{
			Name:    "nothing names the leader: graded by what the client felt, still refused 11 s at the end",
			Traffic: func(h *dt.Harness) { legacyLoop(h, 12, time.Second) },
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"legacy (10.1.9.9) got 12 NOT_LEADER_OR_FOLLOWER for t-0 in 11.0 s from 1 server(s)", "nothing in the capture names the leader"},
				Detail: &notleaderloop.Finding{
					Requests: 12, NotLeaderResponses: 12, Shape: notleaderloop.ShapeUnknown, LeaderID: int32(-1),
				}, Exact: []string{"Shape"},
			}},
			Explanation: []string{"legacy (10.1.9.9) sent 12 Produce requests for t-0 over 11.0 s (1.1/s), 12 to 10.1.0.2:9092, and every answer was NOT_LEADER_OR_FOLLOWER",
				"It was still refused when the capture ended, 11.0 s after its first refused request."},
			Next: []string{"kafka-topics.sh --describe --topic t) to see which broker leads partition 0"},
		},
		{
			Name: "near miss: the leader moves and the client follows",
			Traffic: func(h *dt.Harness) {
				old := h.Conn("10.1.5.5:55000", "10.1.0.1:9092")
				nw := h.Conn("10.1.5.5:55001", "10.1.0.2:9092")
				dt.Every(h, old, "follower-app", 5, 0, 100*time.Millisecond, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ProduceTo(10, "orders", 0), dt.ProducedTo(10, "orders", 6, 2, 8, "10.1.0.2", 9092, 0)
					})
				dt.Every(h, nw, "follower-app", 120, time.Second, 500*time.Millisecond, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ProduceTo(10, "orders", 0), dt.ProducedTo(10, "orders", 0, -1, -1, "", 0, 0)
					})
			},
		},
		{
			Name: "near miss: the client reaches the leader the answers name, and is refused there too by another error",
			Traffic: func(h *dt.Harness) {
				f := h.Conn("10.1.5.9:55400", "10.1.0.1:9092")
				l := h.Conn("10.1.5.9:55401", "10.1.0.2:9092")
				for i := range 20 {
					h.Call(f, dt.At(time.Duration(i)*time.Second), time.Millisecond, "reacher", dt.ProduceTo(10, "orders", 0),
						dt.ProducedTo(10, "orders", 6, 2, 8, "10.1.0.2", 9092, 0))
					h.Call(l, dt.At(time.Duration(i)*time.Second+100*time.Millisecond), time.Millisecond, "reacher", dt.ProduceTo(10, "orders", 0),
						dt.ProducedTo(10, "orders", 3, -1, -1, "", 0, 0))
				}
			},
		},
		{
			Name: "near miss: each leadership change is short though the changes go on",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.1.5.6:55100", "10.1.0.1:9092")
				dt.Every(h, c, "flappy", 40, 0, 700*time.Millisecond, time.Millisecond,
					func(i int) (kmsg.Request, kmsg.Response) {
						return dt.ConsumerFetch("orders", 0, 77, 0), dt.ConsumerFetched("orders", 0, 6, -1, -1, 2, int32(20+i/4), nil)
					})
			},
		},
		{
			Name: "near miss: NOT_LEADER now and then, each time followed by a success within 3 s",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.1.5.8:55300", "10.1.0.1:9092")
				dt.Every(h, c, "flaky", 60, 0, 900*time.Millisecond, time.Millisecond, func(i int) (kmsg.Request, kmsg.Response) {
					if i%4 == 3 {
						return dt.ProduceTo(9, "orders", 0), dt.ProducedTo(9, "orders", 0, -1, -1, "", 0, 0)
					}
					return dt.ProduceTo(9, "orders", 0), dt.ProducedTo(9, "orders", 6, -1, -1, "", 0, 0)
				})
			},
		},
		{
			Name: "near miss: a burst of NOT_LEADER during an election, then success",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.1.5.7:55200", "10.1.0.1:9092")
				burst(h, c)
				dt.Every(h, c, "burst", 40, 2500*time.Millisecond, time.Second, time.Millisecond,
					func(int) (kmsg.Request, kmsg.Response) {
						return dt.ProduceTo(9, "orders", 0), dt.ProducedTo(9, "orders", 0, -1, -1, "", 0, 0)
					})
			},
		},
		{
			Name:     "the burst is a loop once min-duration is lowered (a bare number is in seconds); held up under 3 s, info",
			Settings: map[string]string{"min-duration": "1"},
			Traffic:  func(h *dt.Harness) { burst(h, h.Conn("10.1.5.7:55200", "10.1.0.1:9092")) },
			Want:     []dt.Want{{Severity: detectors.Info, Detail: &notleaderloop.Finding{NotLeaderResponses: 40}}},
		},
		{
			Name:     "near miss: min-duration 2.5s is longer than the burst",
			Settings: map[string]string{"min-duration": "2.5s"},
			Traffic:  func(h *dt.Harness) { burst(h, h.Conn("10.1.5.7:55200", "10.1.0.1:9092")) },
		},
		{
			Name:     "min-responses raised above the slow retrier's count",
			Settings: map[string]string{"min-responses": "16"},
			Traffic:  kafkajs,
		},
		{
			Name: "a run counts what else its requests met: unanswered, other errors; its offset moves",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.1.4.4:56000", "10.1.0.1:9092")
				var last *flows.Message
				for i := range 20 {
					resp := kmsg.Response(dt.ConsumerFetched("orders", 0, 6, -1, -1, 2, 9, nil))
					switch i {
					case 5:
						resp = dt.ConsumerFetched("orders", 0, 3, -1, -1, -1, -1, nil)
					case 19:
						resp = nil
					}
					last, _ = h.Call(c, dt.At(time.Duration(i)*time.Second), time.Millisecond, "mover", dt.ConsumerFetch("orders", 0, int64(100+i/10), 0), resp)
				}
				h.Unanswered(c, last)
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Detail: &notleaderloop.Finding{
					Requests: 20, NotLeaderResponses: 18, OtherErrors: 1, Unanswered: 1,
					FetchOffset: dt.Ptr[int64](int64(101)), FirstFetchOffset: dt.Ptr[int64](int64(100)),
					Duration: 18.001,
				},
			}},
		},
		{
			Name: "a topic named by id in the answers is named as Metadata names it",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.1.3.3:57000", "10.1.0.1:9092")
				req, resp := dt.MetadataLeader("orders", 2, 9, brokers, 0)
				resp.Topics[0].TopicID = [16]byte{4}
				h.Call(c, dt.At(0), time.Millisecond, "by-id", req, resp)
				dt.Every(h, c, "by-id", 12, time.Second, time.Second, time.Millisecond, func(int) (kmsg.Request, kmsg.Response) {
					req, resp := dt.ConsumerFetch("", 0, 50, 0), dt.ConsumerFetched("", 0, 6, -1, -1, 2, 9, nil)
					req.Version, req.Topics[0].TopicID = 13, [16]byte{4}
					resp.Version, resp.Topics[0].TopicID = 13, [16]byte{4}
					return req, resp
				})
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"by-id (10.1.3.3) keeps sending Fetch for orders-0"},
				Detail: &notleaderloop.Finding{
					FetchOffset: dt.Ptr[int64](int64(50)), LeaderID: int32(2),
					MetadataLeaderID: dt.Ptr[int32](int32(2)), Fields: peers.Fields{Topic: "orders"},
				},
			}},
		},
		{
			// kraft-listener-conflict: a broker's replica fetcher asks
			// by topic id and never for Metadata; a producer's Metadata
			// names the topic 0.6 s after the fetcher's first refusal.
			Name: "a run begun by topic id before any Metadata named the topic goes on under the name: one run",
			Traffic: func(h *dt.Harness) {
				c := h.Conn("10.1.3.4:57000", "10.1.0.1:9092")
				byID := func(int) (kmsg.Request, kmsg.Response) {
					req, resp := dt.ConsumerFetch("", 0, 50, 0), dt.ConsumerFetched("", 0, 6, -1, -1, 2, 9, nil)
					req.Version, req.Topics[0].TopicID = 13, [16]byte{5}
					resp.Version, resp.Topics[0].TopicID = 13, [16]byte{5}
					return req, resp
				}
				dt.Every(h, c, "replica-fetcher", 3, 0, time.Second, time.Millisecond, byID)
				req, resp := dt.MetadataLeader("orders", 2, 9, brokers, 0)
				resp.Topics[0].TopicID = [16]byte{5}
				h.Call(h.Conn("10.1.3.5:57001", "10.1.0.1:9092"), dt.At(2500*time.Millisecond), time.Millisecond, "producer", req, resp)
				dt.Every(h, c, "replica-fetcher", 10, 3*time.Second, time.Second, time.Millisecond, byID)
			},
			Want: []dt.Want{{
				Severity: detectors.Error,
				Summary:  []string{"replica-fetcher (10.1.3.4) keeps sending Fetch for orders-0", "13 NOT_LEADER_OR_FOLLOWER", "in 12.0 s"},
				Detail:   &notleaderloop.Finding{NotLeaderResponses: 13, Fields: peers.Fields{Topic: "orders"}},
			}},
		},
	},
		policy,
		dt.Edge("held up 3 s (the policy's FeltAfter): refused for 3.1 s, then a success", nil,
			dt.Want{Severity: detectors.Warning, Detail: &notleaderloop.Finding{
				NotLeaderResponses: 15, HeldS: 3.1, Ongoing: false, Shape: notleaderloop.ShapeMetaSelf,
			}, Exact: []string{"Ongoing", "Shape"}},
			func(h *dt.Harness) { metaLoop(h, 15, 200*time.Millisecond, 3100*time.Millisecond, 0) },
			func(h *dt.Harness) { metaLoop(h, 15, 200*time.Millisecond, 2900*time.Millisecond, 0) }),
		dt.Edge("min-responses (2 refusals, then a success 5 s on: kgo at its metadata refresh)", nil,
			dt.Want{Severity: detectors.Warning, Detail: &notleaderloop.Finding{NotLeaderResponses: 2, HeldS: 9.0}},
			func(h *dt.Harness) { metaLoop(h, 2, 4*time.Second, 9*time.Second, 0) },
			func(h *dt.Harness) { metaLoop(h, 1, 4*time.Second, 5*time.Second, 0) }),
		dt.Edge("burst-responses (100 answers in a second, held up under 3 s: a warning, no backoff)", nil,
			dt.Want{Severity: detectors.Warning, Detail: &notleaderloop.Finding{NotLeaderResponses: 100, Ongoing: true}},
			func(h *dt.Harness) { produceLoop(h, 100, 10*time.Millisecond) }, func(h *dt.Harness) { produceLoop(h, 99, 10*time.Millisecond) }),
	), nil)
}

func of(fs []detectors.Finding) []detectors.Finding {
	var out []detectors.Finding
	for _, f := range fs {
		if f.Detector == rule {
			out = append(out, f)
		}
	}
	return out
}

// TestNotLeaderLoopExplainsErrorStorm: the error storm of a looping client
// is the loop's consequence, typed: same error, same client.
func TestNotLeaderLoopSubject(t *testing.T) {
	h := dt.New(t, nil, notleaderloop.Analyzer)
	kafkajs(h)
	fs := of(h.Findings())
	if len(fs) != 1 {
		t.Fatalf("%d findings", len(fs))
	}
	s := fs[0].Subject
	storm := detectors.Subject{ClientIDs: []string{"kafkajs"}, Error: 6}
	other := detectors.Subject{ClientIDs: []string{"kafkajs"}, Error: 3}
	if !s.Explains(&storm) || s.Explains(&other) {
		t.Errorf("subject %+v: explains the client's NOT_LEADER_OR_FOLLOWER storm %v, another error %v", s, s.Explains(&storm), s.Explains(&other))
	}
	if len(s.Partitions) != 1 || s.Partitions[0] != (cluster.Partition{Topic: "events", Num: 0}) || s.Clients[0].String() != "10.1.6.6" {
		t.Errorf("subject %+v", s)
	}
}
